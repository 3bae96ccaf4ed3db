// Exact parsing and formatting of the quantities users type: memory sizes, CPU
// amounts, GPU fractions and durations.
//
// Parsing is exact integer arithmetic on the decimal text: "0.25" of a GPU is 250
// milli-GPU and "1.5GiB" is 1536 MiB, with no floating point on the way. Text that
// does not land on a whole ledger unit ("0.0001" of a GPU, "1.5" MiB) is refused, not
// rounded. Negative values are refused. Errors are InvalidArgument and quote the text.
//
//   ParseMemoryMiB       "20GiB", "20Gi", "512MiB", "512Mi", "1TiB", "1.5GiB", "2048KiB";
//                        a bare number is MiB. Decimal units (GB, G, MB) are refused
//                        with a hint, since 20GB is not 20GiB.
//   ParseCpuMilli        "4", "0.5", "500m" (milli-cores).
//   ParseGpuMilli        "0.25", "1": a fraction of one GPU in (0, 1].
//   ParseDurationMicros  "90" (seconds), "30s", "5m", "4h", "1d", "1h30m", "250ms", "10us",
//                        "1.5h"; each unit at most once.
//
// Slurm's forms, for batch scripts and the flags Slurm users type:
//   ParseSlurmMemoryMiB  "4G" (GiB), "512M", "1T", "100K" (rounded up to a whole MiB),
//                        "4096" (a bare number is MiB); K/M/G/T are binary, either case.
//   ParseSlurmTime       minutes "90", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S";
//                        "UNLIMITED", "INFINITE" and "0" are no limit (nullopt).
//
// Formatters write the shortest exact text the parsers read back:
// FormatMiB(20480) == "20GiB", FormatMiB(1536) == "1536MiB", FormatDuration(5400e6) ==
// "1h30m" (base/time_format.h), FormatCpuMilli(500) == "500m", FormatGpuFraction(250) == "0.25".
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/time_format.h"
#include "base/status.h"

namespace tessera {

StatusOr<int64_t> ParseMemoryMiB(std::string_view text);
StatusOr<int64_t> ParseCpuMilli(std::string_view text);
StatusOr<int64_t> ParseGpuMilli(std::string_view text);
StatusOr<int64_t> ParseDurationMicros(std::string_view text);
StatusOr<int64_t> ParseSlurmMemoryMiB(std::string_view text);
StatusOr<std::optional<Micros>> ParseSlurmTime(std::string_view text);

// "20GiB", "1TiB", "1536MiB", "0MiB".
std::string FormatMiB(int64_t mib);
// "4" for whole cores, else "1500m".
std::string FormatCpuMilli(int64_t milli);
// 250 -> "0.25", 1000 -> "1".
std::string FormatGpuFraction(int64_t milli);
// "1h30m", "45s", "2d", "1s500ms", "0s".

// The exact value of the non-negative decimal `number` ("12", "0.25", "1.") times
// mul / div, when that is a whole number that fits in int64. Used by the parsers
// above; exposed for other units (e.g. a quantity in a trace file).
StatusOr<int64_t> ParseScaledDecimal(std::string_view number, int64_t mul, int64_t div = 1);

}  // namespace tessera
