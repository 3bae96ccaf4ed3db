// Small string helpers shared by readers and the command line: splitting, trimming
// and strict integer parsing that reports bad input as InvalidArgument instead of
// silently reading a prefix (as atoi would). Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

std::vector<std::string_view> Split(std::string_view text, char sep);
std::string_view Trim(std::string_view text);
// A-Z to a-z; other bytes unchanged (no locale).
std::string AsciiLower(std::string_view text);
bool StartsWith(std::string_view text, std::string_view prefix);
bool EndsWith(std::string_view text, std::string_view suffix);
// How often `what` (not empty) occurs in `text`, overlapping occurrences included.
int CountOccurrences(std::string_view text, std::string_view what);
// `v` with `decimals` digits after the point (clamped to 0..9), as printf's "%.*f"
// writes it ("12.50").
std::string FixedDecimal(double v, int decimals);

// Parses the whole of `text` (after trimming) as a base-10 integer.
StatusOr<int64_t> ParseInt64(std::string_view text);

// Parses "42", "42-51" or "1,5,9-11" into the listed integers, in order.
StatusOr<std::vector<int64_t>> ParseIntList(std::string_view text);

// Escapes < > & " ' for XML text and attribute values (SVG reports).
std::string XmlEscape(std::string_view text);

// Joins items with `sep`.
std::string Join(const std::vector<std::string>& items, std::string_view sep);

}  // namespace tessera
