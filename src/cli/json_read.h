// Reading the server's JSON answers without exceptions: a missing key, null, or a
// value of another type reads as absent (empty string, nullopt, 0, empty array).
// Used by the CLI's commands, which must print what they can of any answer.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/clock.h"

namespace tessera::json_read {

// The value under `key`, or nullptr when `j` is not an object, lacks it or holds null.
const nlohmann::json* Field(const nlohmann::json& j, const char* key);
std::string Str(const nlohmann::json& j, const char* key);
// A finite number.
std::optional<double> OptNumber(const nlohmann::json& j, const char* key);
// An integer; a float is rounded, an unsigned over INT64_MAX saturates.
std::optional<int64_t> AsInt(const nlohmann::json& v);
std::optional<int64_t> OptInt(const nlohmann::json& j, const char* key);
int64_t Int(const nlohmann::json& j, const char* key);
bool Bool(const nlohmann::json& j, const char* key, bool fallback);
// An RFC 3339 time.
std::optional<Micros> Time(const nlohmann::json& j, const char* key);
// The array under `key`, or an empty one.
const nlohmann::json& Array(const nlohmann::json& j, const char* key);

}  // namespace tessera::json_read
