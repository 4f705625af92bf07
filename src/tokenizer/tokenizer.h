// Tessera's tokenizer: a model's tokenizer.json (+ tokenizer_config.json,
// generation_config.json), token-for-token identical to Hugging Face tokenizers.
//
//   auto tok = tessera::Tokenizer::load("models/Qwen3-8B");     // or ".../tokenizer.json"
//   std::vector<int32_t> ids = tok.encode("Hello", /*add_special_tokens=*/true);
//   std::string text = tok.decode(ids, /*skip_special=*/true);
//
// Thread safety: a const Tokenizer may be used from any number of threads at once.
//
// Invalid UTF-8: encode() first replaces each maximal invalid byte sequence of its input
// with U+FFFD (as Rust's String::from_utf8_lossy does, the reference's own entry point
// for bytes), then encodes; it never fails on text. decode() always returns valid UTF-8:
// bytes that do not form characters become U+FFFD the way the tokenizer's decoder says
// (from_utf8_lossy for byte-level decoders, one U+FFFD per byte for byte-fallback runs).
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

namespace tok {
struct TokenizerImpl;
}

class Tokenizer {
 public:
  // `path`: a model directory holding tokenizer.json (and optionally tokenizer_config.json,
  // generation_config.json, config.json), or a tokenizer.json file (its directory is searched
  // for the others). Throws tessera::Error naming the file and field at fault.
  static Tokenizer load(const std::filesystem::path& path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // add_special_tokens: apply tokenizer.json's post-processor (e.g. a leading BOS), exactly as
  // Hugging Face tokenizers' encode(text, add_special_tokens) does.
  // parse_special: match special added tokens written in the text ("<|im_start|>") and emit
  // their ids. Pass false for untrusted content (chat messages): the text of a special
  // token is then encoded as plain text, so a user cannot inject control tokens.
  // Non-special added tokens are matched either way, as in the reference.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false, bool parse_special = true) const;

  // Ids the tokenizer does not know are skipped. skip_special drops special added tokens.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The bytes token `id` adds to a text after other tokens, before any UTF-8 repair (a
  // byte-fallback or byte-level token may hold part of a character); "" for special and unknown
  // ids. Concatenated over encode(text) they give text back where decode() would.
  std::string token_bytes(int32_t id) const;
  // token_bytes() of every id below vocab_size(): the table grammars read tokens through.
  std::vector<std::string> all_token_bytes() const;
  // Token strings as in tokenizer.json ("Ġhello", "▁the", "<0x0A>"); "" for an unknown id.
  std::string id_to_token(int32_t id) const;
  // -1 when the token does not exist.
  int32_t token_to_id(std::string_view token) const;
  // One more than the largest id of the model or of an added token.
  int32_t vocab_size() const;

  // Special tokens from tokenizer_config.json / generation_config.json; -1 / "" when absent.
  int32_t bos_id() const;
  const std::string& bos_token() const;
  // The first eos id; eos_ids() holds all of them (tokenizer_config's eos_token and every
  // generation_config eos_token_id), each of which ends generation.
  int32_t eos_id() const;
  const std::string& eos_token() const;
  const std::vector<int32_t>& eos_ids() const;
  bool is_eos(int32_t id) const;
  int32_t pad_id() const;
  int32_t unk_id() const;
  // tokenizer_config.json's add_bos_token / add_eos_token (false when absent). encode() does
  // not consult these: the post-processor decides, as in the reference; they are exposed for
  // callers that build prompts themselves.
  bool add_bos() const;
  bool add_eos() const;
  // True for added tokens marked special in tokenizer.json.
  bool is_special(int32_t id) const;

 private:
  explicit Tokenizer(std::unique_ptr<tok::TokenizerImpl> impl);
  std::unique_ptr<tok::TokenizerImpl> impl_;
};

// Incremental detokenizer for generation: push() each new id and get the text that became
// complete. It never emits part of a UTF-8 character or of a byte-fallback sequence, keeps
// the leading-space rules of SentencePiece decoders, and the concatenation of everything
// returned (pushes + flush) equals tok.decode(all ids, skip_special).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false);
  std::string push(int32_t id);
  // Returns any held-back text (e.g. an incomplete character at the end, as U+FFFD) and resets.
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;  // context window: ids since the last settled boundary
  size_t prefix_len_ = 0;     // ids_[0, prefix_len_) are context already emitted before the window
  std::string prefix_text_;   // decode(ids_) at the last emission
};

}  // namespace tessera
