#include "server/api_error.h"

namespace tessera::server {

nlohmann::json error_body(int status, const std::string& message, const std::string& param) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status == 429 ? "rate_limit_error"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
            {"code", status}}}};
}

nlohmann::json ApiError::to_json() const {
  return error_body(status_, what(), param_);
}

}  // namespace tessera::server
