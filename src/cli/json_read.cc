#include "cli/json_read.h"

#include <cmath>

#include "base/time_format.h"

namespace tessera::json_read {

using nlohmann::json;

const json* Field(const json& j, const char* key) {
  if (!j.is_object()) {
    return nullptr;
  }
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string Str(const json& j, const char* key) {
  const json* v = Field(j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

std::optional<double> OptNumber(const json& j, const char* key) {
  const json* v = Field(j, key);
  if (v == nullptr || !v->is_number()) {
    return std::nullopt;
  }
  const double d = v->get<double>();
  return std::isfinite(d) ? std::optional<double>(d) : std::nullopt;
}

std::optional<int64_t> AsInt(const json& v) {
  if (v.is_number_integer()) {
    return v.get<int64_t>();
  }
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::fabs(d) < 9e18) {
      return static_cast<int64_t>(std::llround(d));
    }
  }
  return std::nullopt;
}

std::optional<int64_t> OptInt(const json& j, const char* key) {
  const json* v = Field(j, key);
  return v == nullptr ? std::nullopt : AsInt(*v);
}

int64_t Int(const json& j, const char* key) { return OptInt(j, key).value_or(0); }

bool Bool(const json& j, const char* key, bool fallback) {
  const json* v = Field(j, key);
  return v != nullptr && v->is_boolean() ? v->get<bool>() : fallback;
}

std::optional<Micros> Time(const json& j, const char* key) {
  const std::string text = Str(j, key);
  if (text.empty()) {
    return std::nullopt;
  }
  StatusOr<Micros> t = ParseRfc3339(text);
  return t.ok() ? std::optional<Micros>(*t) : std::nullopt;
}

const json& Array(const json& j, const char* key) {
  static const json kEmpty = json::array();
  const json* v = Field(j, key);
  return v != nullptr && v->is_array() ? *v : kEmpty;
}

}  // namespace tessera::json_read
