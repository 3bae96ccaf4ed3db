// Strict, non-throwing reading of JSON documents from users and peers.
//
// FieldReader reads typed fields out of an nlohmann::json value and reports the first
// problem as InvalidArgument "path: message", where path names the field
// ("resources.gpus", "tasks[2].key.job"). It remembers that path (error_path()) so a
// caller that parsed YAML can add the source line. Error messages describe bad values
// without dumping them (a list or object is "a list" / "an object"; long strings are
// cut), so an error about a huge input stays small.
//
// ParseJsonText parses text with bounds: a size limit, a nesting limit checked before
// the parser runs, and duplicate keys refused (nlohmann would keep the last one
// silently). Strings handed out by FieldReader are valid UTF-8 without NUL bytes, so
// anything built from them can be dumped back to JSON without throwing.
// Thread safety: FieldReader is a value holding the last error path; use one per
// parse. The free functions are pure.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

using Json = nlohmann::json;

// "a.b" (or "b" when parent is ""), and "a[3]".
std::string ChildPath(std::string_view parent, std::string_view key);
std::string IndexPath(std::string_view parent, size_t index);

// A short description of a value for messages: "the string 'abc'", "42", "a list".
std::string DescribeJson(const Json& value);

// The value under `key` of an object, or nullptr when absent or null (null reads as
// "not given", so defaults apply). `object` must be an object.
const Json* FindField(const Json& object, std::string_view key);

// The decimal text of a JSON number: integers as is, floating point in the shortest
// fixed notation that reads back to the same double (0.25 -> "0.25", 1e-05 ->
// "0.00001"). Not a number: "".
std::string JsonNumberText(const Json& value);

bool IsValidUtf8(std::string_view text);
// `text` with each invalid UTF-8 sequence replaced by U+FFFD.
std::string ToValidUtf8(std::string_view text);
// Json::dump that never throws: invalid UTF-8 in strings is replaced.
std::string DumpJson(const Json& value, int indent = -1);

struct JsonTextLimits {
  size_t max_bytes = 1 << 20;
  int max_depth = 32;
};

// Parses `text` as one JSON value. InvalidArgument (prefixed with `what`, e.g. "job
// spec") for malformed text, text over the limits or an object with a repeated key.
StatusOr<Json> ParseJsonText(std::string_view text, std::string_view what,
                             const JsonTextLimits& limits = {});

class FieldReader {
 public:
  // InvalidArgument "path: message" ("message" alone when path is ""); remembers path.
  Status Error(std::string_view path, std::string_view message);
  // The path of the last error returned by this reader.
  const std::string& error_path() const { return error_path_; }

  // `value` must be an object. With a non-empty `allowed`, every key must be in it:
  // an unknown key is an error naming it and its place, with a suggestion for a
  // likely typo.
  Status CheckObject(const Json& value, std::string_view path,
                     std::span<const std::string_view> allowed);
  Status CheckObject(const Json& value, std::string_view path,
                     std::initializer_list<std::string_view> allowed = {}) {
    return CheckObject(value, path,
                       std::span<const std::string_view>(allowed.begin(), allowed.size()));
  }
  Status CheckArray(const Json& value, std::string_view path, size_t max_items);

  // A JSON string: valid UTF-8, no NUL byte, at most max_bytes.
  StatusOr<std::string> String(const Json& value, std::string_view path, size_t max_bytes);
  // A string, or a number or boolean written as text (for argv items and env values,
  // where YAML users write `OMP_NUM_THREADS: 4`).
  StatusOr<std::string> ScalarText(const Json& value, std::string_view path, size_t max_bytes);
  // An integer in [min, max]. A floating-point number with an integral value counts.
  StatusOr<int64_t> Int(const Json& value, std::string_view path, int64_t min, int64_t max);
  StatusOr<uint64_t> Uint64(const Json& value, std::string_view path);
  StatusOr<bool> Bool(const Json& value, std::string_view path);
  // A quantity: a string parsed by `parse`, or a number whose decimal text is parsed
  // the same way (so 0.25 and "0.25" agree exactly).
  StatusOr<int64_t> Quantity(const Json& value, std::string_view path,
                             StatusOr<int64_t> (*parse)(std::string_view));

 private:
  std::string error_path_;
};

}  // namespace tessera
