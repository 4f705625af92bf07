#include "tokenizer/tokenizer.h"

namespace tessera {

namespace {
bool ends_incomplete(const std::string& s) {
  // U+FFFD at the end: an incomplete character or byte-fallback run that later ids may finish.
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}
}  // namespace

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special) : tok_(tok), skip_special_(skip_special) {}

// The window ids_ = context (already emitted) + pending ids. Decoding the context together with
// the new ids keeps decoders that treat the first token specially (SentencePiece's leading
// space) consistent with decoding the whole sequence.
std::string StreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  std::string text = tok_.decode(ids_, skip_special_);
  if (text.size() <= prefix_text_.size() || ends_incomplete(text) || text.compare(0, prefix_text_.size(), prefix_text_) != 0)
    return {};
  std::string fresh = text.substr(prefix_text_.size());
  // Keep the ids decoded since the previous emission as context for the next one.
  ids_.erase(ids_.begin(), ids_.begin() + std::ptrdiff_t(prefix_len_));
  prefix_len_ = ids_.size();
  prefix_text_ = tok_.decode(ids_, skip_special_);
  return fresh;
}

std::string StreamDecoder::flush() {
  std::string text = tok_.decode(ids_, skip_special_);
  // Normally the window's text extends what was emitted; should a decoder rewrite earlier text,
  // give what follows the part the two share.
  size_t common = 0;
  while (common < text.size() && common < prefix_text_.size() && text[common] == prefix_text_[common]) ++common;
  while (common > 0 && common < text.size() && (static_cast<unsigned char>(text[common]) & 0xC0) == 0x80) --common;
  std::string rest = text.substr(common);
  ids_.clear();
  prefix_len_ = 0;
  prefix_text_.clear();
  return rest;
}

}  // namespace tessera
