#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace tessera::tok {

namespace {

// Match data and JIT stack are per thread: a pcre2_code may be shared, its scratch may not.
struct ThreadScratch {
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
  pcre2_match_context* mctx = pcre2_match_context_create(nullptr);
  ThreadScratch() { pcre2_jit_stack_assign(mctx, nullptr, stack); }
  ~ThreadScratch() {
    pcre2_match_context_free(mctx);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(md);
  }
};

ThreadScratch& scratch() {
  thread_local ThreadScratch s;
  return s;
}

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where) {
  int err = 0;
  PCRE2_SIZE off = 0;
  // UCP: \s, \w, \d and POSIX classes use Unicode properties, as Oniguruma does for UTF-8.
  // NO_UTF_CHECK at match time: every text reaching here was made valid UTF-8 at the entry.
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(where + ": invalid regex at offset " + std::to_string(off) + ": " +
                reinterpret_cast<char*>(msg) + " in /" + pattern + "/");
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  auto& s = scratch();
  auto* code = static_cast<pcre2_code*>(code_);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, s.md, s.mctx);
    if (rc < 0) {
      if (rc == PCRE2_ERROR_NOMATCH) break;
      throw Error("regex match failed with PCRE2 error " + std::to_string(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
    out.emplace_back(ov[0], ov[1]);
    if (ov[1] > ov[0]) {
      pos = ov[1];
    } else {
      if (ov[1] >= text.size()) break;
      pos = ov[1] + utf8_len((unsigned char)text[ov[1]]);
    }
  }
}

}  // namespace tessera::tok
