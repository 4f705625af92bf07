// Errors a client caused (or may retry), in OpenAI's shape:
//   {"error": {"message", "type", "param", "code"}} with the matching HTTP status.
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace tessera::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "")
      : std::runtime_error(message), status_(status), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  nlohmann::json to_json() const;

 private:
  int status_;
  std::string param_;
};

// The OpenAI error body for a status and message.
nlohmann::json error_body(int status, const std::string& message, const std::string& param = "");

}  // namespace tessera::server
