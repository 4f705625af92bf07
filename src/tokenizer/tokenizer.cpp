#include "tokenizer/tokenizer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/added_vocab.h"
#include "tokenizer/decoder.h"
#include "tokenizer/json_scan.h"
#include "tokenizer/model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_config.h"
#include "tokenizer/unicode.h"

namespace tessera {

namespace tok {

struct TokenizerImpl {
  std::unique_ptr<Normalizer> normalizer;
  PreTokenizerChain pre;
  std::unique_ptr<Model> model;
  AddedVocab added;
  std::unique_ptr<PostProcessor> post;
  std::unique_ptr<Decoder> decoder;
  SpecialConfig special;

  void encode_text(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
  void encode_normalized(std::string_view text, bool at_start, bool parse_special, std::vector<int32_t>& out) const;
};

void TokenizerImpl::encode_text(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
  thread_local Words words;
  words.text.assign(text);
  words.spans.assign(1, {0, uint32_t(text.size()), at_start});
  if (pre.pre) pre.pre->apply(words);
  for (const auto& s : words.spans) model->encode_word(words.view(s), pre.byte_level_output, out);
}

// Matches the added tokens that are compared with normalized text, then encodes the rest.
void TokenizerImpl::encode_normalized(std::string_view text, bool at_start, bool parse_special,
                                      std::vector<int32_t>& out) const {
  std::vector<AddedVocab::Segment> segs;
  added.split(text, /*normalized_set=*/true, parse_special, segs);
  for (const auto& s : segs) {
    if (s.id >= 0) out.push_back(s.id);
    else if (s.end > s.begin) encode_text(text.substr(s.begin, s.end - s.begin), at_start && s.begin == 0, out);
  }
}

}  // namespace tok

namespace {

// tokenizer.json mapped read-only: no copy of a file that can be tens of MB.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& p) {
    int fd = ::open(p.c_str(), O_RDONLY);
    if (fd < 0) throw Error("cannot open " + p.string());
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      throw Error("cannot stat " + p.string());
    }
    size_ = size_t(st.st_size);
    if (size_ > 0) {
      data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
      if (data_ == MAP_FAILED) {
        ::close(fd);
        throw Error("cannot map " + p.string());
      }
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (size_ > 0) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view text() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

std::vector<tok::AddedToken> parse_added(const nlohmann::json& list, const std::string& where) {
  std::vector<tok::AddedToken> out;
  if (list.is_null()) return out;
  for (const auto& a : list) {
    tok::AddedToken t;
    try {
      t.id = a.at("id").get<int32_t>();
      t.content = a.at("content").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      throw Error(where + ": added_tokens entry needs 'id' and 'content': " + e.what());
    }
    t.special = a.value("special", false);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.single_word = a.value("single_word", false);
    t.normalized = a.value("normalized", !t.special);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
  std::filesystem::path file = path, dir = path;
  if (std::filesystem::is_directory(path)) file = path / "tokenizer.json";
  else dir = path.parent_path();
  if (!std::filesystem::exists(file)) throw Error("tokenizer not found: " + file.string());
  const std::string where = file.string();
  const MappedFile mapped(file);
  const std::string_view text = mapped.text();

  std::map<std::string, std::string_view> raw;
  std::unique_ptr<tok::Model> model;
  // Added tokens (thousands in some files) are parsed on the side while the model loads.
  std::future<nlohmann::json> added_json;
  tok::JsonScanner js(text, where);
  js.object([&](const std::string& key) {
    if (key == "model") {
      model = tok::load_model(js, where);
    } else if (key == "added_tokens") {
      std::string_view v = js.skip_value();
      added_json = std::async(std::launch::async, [v] { return nlohmann::json::parse(v); });
    } else {
      raw[key] = js.skip_value();
    }
  });
  if (!model) throw Error(where + ": no 'model' section");
  auto section = [&](const char* key) -> nlohmann::json {
    auto it = raw.find(key);
    if (it == raw.end()) return nullptr;
    try {
      return nlohmann::json::parse(it->second);
    } catch (const nlohmann::json::exception& e) {
      throw Error(where + ": invalid JSON in '" + key + "': " + e.what());
    }
  };

  auto impl = std::make_unique<tok::TokenizerImpl>();
  auto with_context = [&](const char* key, auto&& build) {
    try {
      build(section(key));
    } catch (const Error& e) {
      throw Error(where + ": " + key + ": " + e.what());
    } catch (const nlohmann::json::exception& e) {
      throw Error(where + ": " + key + ": " + e.what());
    }
  };
  with_context("normalizer", [&](const nlohmann::json& j) { impl->normalizer = tok::make_normalizer(j); });
  with_context("pre_tokenizer", [&](const nlohmann::json& j) { impl->pre = tok::make_pre_tokenizer(j); });
  with_context("post_processor", [&](const nlohmann::json& j) { impl->post = tok::make_post_processor(j); });
  with_context("decoder", [&](const nlohmann::json& j) { impl->decoder = tok::make_decoder(j); });
  impl->model = std::move(model);
  nlohmann::json added;
  if (added_json.valid()) {
    try {
      added = added_json.get();
    } catch (const nlohmann::json::exception& e) {
      throw Error(where + ": invalid JSON in 'added_tokens': " + e.what());
    }
  }
  impl->added.build(parse_added(added, where), impl->normalizer.get());

  auto resolve = [&](std::string_view token) -> int32_t {
    if (token.empty()) return -1;
    if (auto* a = impl->added.by_content(token)) return a->id;
    return impl->model->token_to_id(token);
  };
  impl->special = tok::load_special_config(dir, resolve);
  return Tokenizer(std::move(impl));
}

Tokenizer::Tokenizer(std::unique_ptr<tok::TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view input, bool add_special_tokens, bool parse_special) const {
  std::string cleaned;
  std::string_view text = input;
  if (tok::utf8_valid_prefix(input) != input.size()) {
    cleaned = tok::utf8_lossy(input);
    text = cleaned;
  }
  const auto& im = *impl_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<tok::AddedVocab::Segment> segs;
  im.added.split(text, /*normalized_set=*/false, parse_special, segs);
  std::string norm;
  for (const auto& s : segs) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    std::string_view piece = text.substr(s.begin, s.end - s.begin);
    if (im.normalizer) {
      norm.assign(piece);
      im.normalizer->normalize(norm);
      piece = norm;
    }
    if (!piece.empty()) im.encode_normalized(piece, s.begin == 0, parse_special, ids);
  }
  if (add_special_tokens && im.post) ids = im.post->process(std::move(ids));
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const auto& im = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const auto* a = im.added.by_id(id)) {
      if (skip_special && a->special) continue;
      tokens.push_back(a->text);
    } else if (im.model->has_id(id)) {
      std::string_view t = im.model->id_to_token(id);
      if (skip_special) {
        const auto* named = im.added.by_content(t);
        if (named && named->special) continue;
      }
      tokens.emplace_back(t);
    }
  }
  std::string out;
  if (im.decoder) {
    im.decoder->decode_chain(tokens, false);
    for (auto& t : tokens) out += t;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
  }
  return out;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  const auto& im = *impl_;
  std::vector<std::string> tokens;
  if (const auto* a = im.added.by_id(id)) {
    if (a->special) return "";
    tokens.push_back(a->text);
  } else if (im.model->has_id(id)) {
    std::string_view t = im.model->id_to_token(id);
    if (const auto* named = im.added.by_content(t); named && named->special) return "";
    tokens.emplace_back(t);
  } else {
    return "";
  }
  if (im.decoder) im.decoder->decode_chain(tokens, true);
  std::string out;
  for (auto& t : tokens) out += t;
  return out;
}

std::vector<std::string> Tokenizer::all_token_bytes() const {
  std::vector<std::string> out(static_cast<size_t>(vocab_size()));
  for (int32_t id = 0; id < vocab_size(); ++id) out[size_t(id)] = token_bytes(id);
  return out;
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (const auto* a = impl_->added.by_id(id)) return a->text;
  return std::string(impl_->model->id_to_token(id));
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
  if (const auto* a = impl_->added.by_content(token)) return a->id;
  return impl_->model->token_to_id(token);
}

int32_t Tokenizer::vocab_size() const {
  int32_t n = int32_t(impl_->model->id_limit());
  for (const auto& a : impl_->added.tokens()) n = std::max(n, a.id + 1);
  return n;
}

int32_t Tokenizer::bos_id() const { return impl_->special.bos_id; }
const std::string& Tokenizer::bos_token() const { return impl_->special.bos_token; }
int32_t Tokenizer::eos_id() const { return impl_->special.eos_ids.empty() ? -1 : impl_->special.eos_ids[0]; }
const std::string& Tokenizer::eos_token() const { return impl_->special.eos_token; }
const std::vector<int32_t>& Tokenizer::eos_ids() const { return impl_->special.eos_ids; }
bool Tokenizer::is_eos(int32_t id) const {
  const auto& e = impl_->special.eos_ids;
  return std::find(e.begin(), e.end(), id) != e.end();
}
int32_t Tokenizer::pad_id() const { return impl_->special.pad_id; }
int32_t Tokenizer::unk_id() const { return impl_->special.unk_id; }
bool Tokenizer::add_bos() const { return impl_->special.add_bos; }
bool Tokenizer::add_eos() const { return impl_->special.add_eos; }
bool Tokenizer::is_special(int32_t id) const {
  const auto* a = impl_->added.by_id(id);
  return a && a->special;
}

}  // namespace tessera
