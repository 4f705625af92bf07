#include "tokenizer/post_processor.h"

#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tessera::tok {

namespace {

using json = nlohmann::json;

// TemplateProcessing's "single" template: special tokens and the sequence "A".
class Template : public PostProcessor {
 public:
  explicit Template(const json& j) {
    const auto& specials = j.value("special_tokens", json::object());
    for (const auto& piece : j.at("single")) {
      if (piece.contains("Sequence")) {
        items_.push_back({true, {}});
      } else if (piece.contains("SpecialToken")) {
        std::string name = piece["SpecialToken"].at("id").get<std::string>();
        if (!specials.contains(name))
          throw Error("tokenizer.json: TemplateProcessing uses special token '" + name + "' missing from special_tokens");
        items_.push_back({false, specials[name].at("ids").get<std::vector<int32_t>>()});
      } else {
        throw Error("tokenizer.json: TemplateProcessing piece must be Sequence or SpecialToken");
      }
    }
  }
  std::vector<int32_t> process(std::vector<int32_t> ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + items_.size());
    for (auto& it : items_) {
      if (it.sequence) out.insert(out.end(), ids.begin(), ids.end());
      else out.insert(out.end(), it.ids.begin(), it.ids.end());
    }
    return out;
  }

 private:
  struct Item {
    bool sequence;
    std::vector<int32_t> ids;
  };
  std::vector<Item> items_;
};

// BERT and RoBERTa: [CLS] A [SEP]; "cls"/"sep" are [token, id] pairs.
class ClsSep : public PostProcessor {
 public:
  explicit ClsSep(const json& j) : cls_(j.at("cls").at(1).get<int32_t>()), sep_(j.at("sep").at(1).get<int32_t>()) {}
  std::vector<int32_t> process(std::vector<int32_t> ids) const override {
    ids.insert(ids.begin(), cls_);
    ids.push_back(sep_);
    return ids;
  }

 private:
  int32_t cls_, sep_;
};

// ByteLevel only adjusts offsets, which Tessera does not track.
class Identity : public PostProcessor {
 public:
  std::vector<int32_t> process(std::vector<int32_t> ids) const override { return ids; }
};

class Sequence : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> parts) : parts_(std::move(parts)) {}
  std::vector<int32_t> process(std::vector<int32_t> ids) const override {
    for (auto& p : parts_) ids = p->process(std::move(ids));
    return ids;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const json& j) {
  if (j.is_null()) return nullptr;
  std::string type = j.value("type", "");
  if (type == "TemplateProcessing") return std::make_unique<Template>(j);
  if (type == "BertProcessing" || type == "RobertaProcessing") return std::make_unique<ClsSep>(j);
  if (type == "ByteLevel") return std::make_unique<Identity>();
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const auto& p : j.at("processors"))
      if (auto pp = make_post_processor(p)) parts.push_back(std::move(pp));
    return std::make_unique<Sequence>(std::move(parts));
  }
  throw Error("tokenizer.json: unsupported post_processor type '" + type + "'");
}

}  // namespace tessera::tok
