// RFC 3339 timestamps ("2026-11-29T21:00:00Z") for the API and the CLI.
// Times are Micros since the Unix epoch, always printed in UTC.
// Thread safety: functions, no shared state.
#pragma once

#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/status.h"

namespace tessera {

// "2026-11-29T21:00:00Z"; sub-second parts are dropped.
std::string FormatRfc3339(Micros time);
// Accepts "2026-11-29T21:00:00Z", "2026-11-29T21:00:00.123Z", "...+01:00" and a bare
// date "2026-11-29" (midnight UTC). InvalidArgument quoting the text otherwise.
StatusOr<Micros> ParseRfc3339(std::string_view text);
// The shortest exact duration text api/units.h's ParseDuration reads back: "1h30m",
// "90s", "1d", "250ms".
std::string FormatDuration(Micros micros);

}  // namespace tessera
