// A model directory's config.json (and generation_config.json), with typed lookups whose errors
// name the file and the field.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace tessera {

class HfConfig {
 public:
  static HfConfig load(const std::filesystem::path& model_dir);
  static HfConfig from_json(nlohmann::json config, nlohmann::json generation = nlohmann::json::object());

  const nlohmann::json& raw() const { return config_; }
  const nlohmann::json& generation() const { return generation_; }
  std::string model_type() const;
  bool has(const std::string& key) const { return config_.contains(key) && !config_[key].is_null(); }

  // The field's value; throws "config.json: missing field \"key\"" or a type error naming it.
  template <class T>
  T get(const std::string& key) const {
    TESSERA_CHECK(has(key), "config.json: missing field \"" + key + "\"");
    return convert<T>(config_[key], key);
  }
  template <class T>
  T get_or(const std::string& key, T fallback) const {
    return has(key) ? convert<T>(config_[key], key) : fallback;
  }

  // End-of-sequence ids: generation_config.json's eos_token_id if present, else config.json's
  // (each an int or a list of ints).
  std::vector<int32_t> eos_token_ids() const;

 private:
  template <class T>
  static T convert(const nlohmann::json& v, const std::string& key) {
    try {
      return v.get<T>();
    } catch (const nlohmann::json::exception&) {
      throw Error("config.json: field \"" + key + "\" has the wrong type (" + v.dump() + ")");
    }
  }
  nlohmann::json config_;
  nlohmann::json generation_;
};

}  // namespace tessera
