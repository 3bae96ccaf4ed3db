#include "base/strings.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace tessera {

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    if (pos == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return out;
}

std::string_view Trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) {
    return {};
  }
  size_t end = text.find_last_not_of(kSpace);
  return text.substr(begin, end - begin + 1);
}

std::string FixedDecimal(double v, int decimals) {
  char buf[384];  // DBL_MAX with 9 decimals fits
  std::snprintf(buf, sizeof(buf), "%.*f", std::clamp(decimals, 0, 9), v);
  return buf;
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

int CountOccurrences(std::string_view text, std::string_view what) {
  int n = 0;
  for (size_t at = text.find(what); !what.empty() && at != std::string_view::npos;
       at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

StatusOr<int64_t> ParseInt64(std::string_view text) {
  std::string_view t = Trim(text);
  if (t.empty()) {
    return InvalidArgumentError("expected an integer, got an empty value");
  }
  int64_t value = 0;
  const char* first = t.data();
  const char* last = t.data() + t.size();
  if (*first == '+') {
    ++first;
  }
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec == std::errc::result_out_of_range) {
    return InvalidArgumentError("integer out of range: '" + std::string(t) + "'");
  }
  if (ec != std::errc() || ptr != last) {
    return InvalidArgumentError("expected an integer, got '" + std::string(t) + "'");
  }
  return value;
}

StatusOr<std::vector<int64_t>> ParseIntList(std::string_view text) {
  std::vector<int64_t> out;
  if (Trim(text).empty()) {
    return InvalidArgumentError("expected a list of integers such as 42-51, got nothing");
  }
  for (std::string_view item : Split(text, ',')) {
    item = Trim(item);
    // A leading '-' is a sign, not a range: find the separator after the first digit.
    size_t dash = item.find('-', 1);
    if (dash == std::string_view::npos) {
      TESSERA_ASSIGN_OR_RETURN(int64_t v, ParseInt64(item));
      out.push_back(v);
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(int64_t lo, ParseInt64(item.substr(0, dash)));
    TESSERA_ASSIGN_OR_RETURN(int64_t hi, ParseInt64(item.substr(dash + 1)));
    if (hi < lo) {
      return InvalidArgumentError("range '" + std::string(item) + "' runs backwards");
    }
    if (hi - lo >= 1'000'000) {
      return InvalidArgumentError("range '" + std::string(item) + "' is too long");
    }
    for (int64_t v = lo; v <= hi; ++v) {
      out.push_back(v);
    }
  }
  return out;
}

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) {
      out += sep;
    }
    out += items[i];
  }
  return out;
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace tessera
