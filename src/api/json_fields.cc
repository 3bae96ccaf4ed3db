#include "api/json_fields.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <exception>
#include <set>
#include <vector>

#include "base/strings.h"

namespace tessera {
namespace {

constexpr size_t kMaxDescribed = 40;
constexpr size_t kMaxKeyForSuggestion = 64;

std::string Cut(std::string_view text, size_t max) {
  if (text.size() <= max) {
    return ToValidUtf8(text);
  }
  return ToValidUtf8(text.substr(0, max)) + "...";
}

char LowerAscii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Edit distance, case-insensitive; both strings are short.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1);
  std::vector<size_t> cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) {
    prev[j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t subst = prev[j - 1] + (LowerAscii(a[i - 1]) == LowerAscii(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Length of the valid UTF-8 sequence at text[i], or 0 when it is not one.
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) {
    return 1;
  }
  size_t len = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) {
      lo = 0xA0;  // no overlong forms
    } else if (c == 0xED) {
      hi = 0x9F;  // no surrogates
    }
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) {
      lo = 0x90;
    } else if (c == 0xF4) {
      hi = 0x8F;  // at most U+10FFFF
    }
  } else {
    return 0;
  }
  if (i + len > text.size()) {
    return 0;
  }
  if (byte(i + 1) < lo || byte(i + 1) > hi) {
    return 0;
  }
  for (size_t k = 2; k < len; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) {
      return 0;
    }
  }
  return len;
}

// Rejects nesting deeper than max_depth without parsing (exact for valid JSON).
bool JsonDepthWithin(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return false;
      }
    } else if (c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    }
  }
  return true;
}

}  // namespace

std::string ChildPath(std::string_view parent, std::string_view key) {
  if (parent.empty()) {
    return std::string(key);
  }
  std::string out(parent);
  out += '.';
  out += key;
  return out;
}

std::string IndexPath(std::string_view parent, size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

std::string DescribeJson(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return Cut(JsonNumberText(value), kMaxDescribed);
    case Json::value_t::string:
      return "the string '" + Cut(value.get_ref<const std::string&>(), kMaxDescribed) + "'";
    case Json::value_t::array:
      return "a list";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::binary:
      return "binary data";
    case Json::value_t::discarded:
      break;
  }
  return "nothing";
}

const Json* FindField(const Json& object, std::string_view key) {
  if (!object.is_object()) {
    return nullptr;
  }
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    return nullptr;
  }
  return &*it;
}

std::string JsonNumberText(const Json& value) {
  switch (value.type()) {
    case Json::value_t::number_integer:
      return std::to_string(value.get<int64_t>());
    case Json::value_t::number_unsigned:
      return std::to_string(value.get<uint64_t>());
    case Json::value_t::number_float: {
      const double d = value.get<double>();
      if (!std::isfinite(d)) {
        return std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf");
      }
      // Shortest round-trip text in fixed notation; 1.8e308 needs 309 digits.
      std::array<char, 400> buf{};
      auto [end, ec] =
          std::to_chars(buf.data(), buf.data() + buf.size(), d, std::chars_format::fixed);
      if (ec != std::errc()) {
        return "";
      }
      return std::string(buf.data(), end);
    }
    default:
      return "";
  }
}

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t len = Utf8SequenceLength(text, i);
    if (len == 0) {
      return false;
    }
    i += len;
  }
  return true;
}

std::string ToValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t len = Utf8SequenceLength(text, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string DumpJson(const Json& value, int indent) {
  try {
    return value.dump(indent, ' ', false, Json::error_handler_t::replace);
  } catch (const std::exception&) {
    return "null";
  }
}

StatusOr<Json> ParseJsonText(std::string_view text, std::string_view what,
                             const JsonTextLimits& limits) {
  const std::string prefix = std::string(what) + ": ";
  if (text.size() > limits.max_bytes) {
    return InvalidArgumentError(prefix + "text of " + std::to_string(text.size()) +
                                " bytes is over the limit of " + std::to_string(limits.max_bytes));
  }
  if (!JsonDepthWithin(text, limits.max_depth)) {
    return InvalidArgumentError(prefix + "nested deeper than " + std::to_string(limits.max_depth) +
                                " levels");
  }
  // Tracks where the parser is, to name a repeated key by its path.
  struct Frame {
    bool object = false;
    std::set<std::string> keys;
    std::string key;
    size_t index = 0;
    bool any = false;
  };
  std::vector<Frame> stack;
  std::string repeated;
  auto enter_value = [&]() {
    if (!stack.empty() && !stack.back().object) {
      Frame& f = stack.back();
      f.index = f.any ? f.index + 1 : 0;
      f.any = true;
    }
  };
  auto path_to = [&](std::string_view key) {
    std::string path;
    for (size_t i = 0; i + 1 < stack.size(); ++i) {
      path = stack[i].object ? ChildPath(path, stack[i].key) : IndexPath(path, stack[i].index);
    }
    return ChildPath(path, key);
  };
  Json::parser_callback_t callback = [&](int /*depth*/, Json::parse_event_t event,
                                         Json& parsed) -> bool {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        enter_value();
        stack.emplace_back();
        stack.back().object = event == Json::parse_event_t::object_start;
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!stack.empty()) {
          stack.pop_back();
        }
        break;
      case Json::parse_event_t::key:
        if (!stack.empty() && parsed.is_string()) {
          Frame& f = stack.back();
          f.key = parsed.get<std::string>();
          if (!f.keys.insert(f.key).second && repeated.empty()) {
            repeated = path_to(f.key);
          }
        }
        break;
      case Json::parse_event_t::value:
        enter_value();
        break;
    }
    return true;
  };
  Json value;
  try {
    value = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true);
  } catch (const Json::exception& e) {
    std::string message = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    if (size_t close = message.find("] ");
        message.rfind("[json.exception.", 0) == 0 && close != std::string::npos) {
      message = message.substr(close + 2);
    }
    return InvalidArgumentError(prefix + Cut(message, 300));
  } catch (const std::exception& e) {
    return InvalidArgumentError(prefix + "cannot parse: " + Cut(e.what(), 300));
  }
  if (!repeated.empty()) {
    return InvalidArgumentError(prefix + Cut(repeated, 200) + ": the key appears twice");
  }
  return value;
}

Status FieldReader::Error(std::string_view path, std::string_view message) {
  error_path_ = std::string(path);
  if (path.empty()) {
    return InvalidArgumentError(ToValidUtf8(message));
  }
  return InvalidArgumentError(ToValidUtf8(path) + ": " + ToValidUtf8(message));
}

Status FieldReader::CheckObject(const Json& value, std::string_view path,
                                std::span<const std::string_view> allowed) {
  if (!value.is_object()) {
    return Error(path, "expected an object (a map of keys), got " + DescribeJson(value));
  }
  if (allowed.empty()) {
    return Status::Ok();
  }
  for (const auto& [key, unused] : value.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) {
      continue;
    }
    std::string message = "unknown key '" + Cut(key, 80) + "'";
    if (!path.empty()) {
      message += " in " + ToValidUtf8(path);
    }
    std::string_view best;
    size_t best_distance = 3;
    if (key.size() <= kMaxKeyForSuggestion) {
      for (std::string_view candidate : allowed) {
        size_t d = EditDistance(key, candidate);
        if (d < best_distance && d < candidate.size()) {
          best = candidate;
          best_distance = d;
        }
      }
    }
    if (!best.empty()) {
      message += " (did you mean '" + std::string(best) + "'?)";
    }
    std::vector<std::string> names(allowed.begin(), allowed.end());
    message += "; expected one of " + Join(names, ", ");
    // The error is placed at the key, but reads from the enclosing object.
    error_path_ = ChildPath(path, key);
    return InvalidArgumentError(std::move(message));
  }
  return Status::Ok();
}

Status FieldReader::CheckArray(const Json& value, std::string_view path, size_t max_items) {
  if (!value.is_array()) {
    return Error(path, "expected a list, got " + DescribeJson(value));
  }
  if (value.size() > max_items) {
    return Error(path, "more than " + std::to_string(max_items) + " items (" +
                           std::to_string(value.size()) + ")");
  }
  return Status::Ok();
}

StatusOr<std::string> FieldReader::String(const Json& value, std::string_view path,
                                          size_t max_bytes) {
  if (!value.is_string()) {
    return Error(path, "expected a string, got " + DescribeJson(value));
  }
  const std::string& s = value.get_ref<const std::string&>();
  if (s.size() > max_bytes) {
    return Error(path, "longer than " + std::to_string(max_bytes) + " bytes");
  }
  if (!IsValidUtf8(s)) {
    return Error(path, "not valid UTF-8");
  }
  if (s.find('\0') != std::string::npos) {
    return Error(path, "contains a NUL byte");
  }
  return s;
}

StatusOr<std::string> FieldReader::ScalarText(const Json& value, std::string_view path,
                                              size_t max_bytes) {
  if (value.is_boolean()) {
    return std::string(value.get<bool>() ? "true" : "false");
  }
  if (value.is_number()) {
    std::string text = JsonNumberText(value);
    if (text.size() > max_bytes) {
      return Error(path, "longer than " + std::to_string(max_bytes) + " bytes");
    }
    return text;
  }
  if (!value.is_string()) {
    return Error(path, "expected a string, got " + DescribeJson(value));
  }
  return String(value, path, max_bytes);
}

StatusOr<int64_t> FieldReader::Int(const Json& value, std::string_view path, int64_t min,
                                   int64_t max) {
  int64_t v = 0;
  if (value.is_number_integer() && !value.is_number_unsigned()) {
    v = value.get<int64_t>();
  } else if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(max)) {
      return Error(path, "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                             ", got " + std::to_string(u));
    }
    v = static_cast<int64_t>(u);
  } else if (value.is_number_float()) {
    StatusOr<int64_t> parsed = ParseInt64(JsonNumberText(value));
    if (!parsed.ok()) {
      return Error(path, "expected an integer, got " + DescribeJson(value));
    }
    v = *parsed;
  } else {
    return Error(path, "expected an integer, got " + DescribeJson(value));
  }
  if (v < min || v > max) {
    return Error(path, "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                           ", got " + std::to_string(v));
  }
  return v;
}

StatusOr<uint64_t> FieldReader::Uint64(const Json& value, std::string_view path) {
  if (value.is_number_unsigned()) {
    return value.get<uint64_t>();
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  return Error(path, "expected a non-negative integer, got " + DescribeJson(value));
}

StatusOr<bool> FieldReader::Bool(const Json& value, std::string_view path) {
  if (!value.is_boolean()) {
    return Error(path, "expected true or false, got " + DescribeJson(value));
  }
  return value.get<bool>();
}

StatusOr<int64_t> FieldReader::Quantity(const Json& value, std::string_view path,
                                        StatusOr<int64_t> (*parse)(std::string_view)) {
  std::string text;
  if (value.is_string()) {
    text = value.get<std::string>();
  } else if (value.is_number()) {
    text = JsonNumberText(value);
  } else {
    return Error(path, "expected a number or a string, got " + DescribeJson(value));
  }
  StatusOr<int64_t> parsed = parse(text);
  if (!parsed.ok()) {
    return Error(path, ToValidUtf8(parsed.status().message()));
  }
  return *parsed;
}

}  // namespace tessera
