#include "base/time_format.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(TimeFormatTest, FormatsUtcSeconds) {
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(1'796'000'000'500'000), "2026-11-30T00:53:20Z");
}

TEST(TimeFormatTest, ParsesForms) {
  EXPECT_EQ(ParseRfc3339("1970-01-01T00:00:00Z").value(), 0);
  EXPECT_EQ(ParseRfc3339("2026-11-30T00:53:20Z").value(), 1'796'000'000'000'000);
  EXPECT_EQ(ParseRfc3339("2026-11-30T00:53:20.25Z").value(), 1'796'000'000'250'000);
  EXPECT_EQ(ParseRfc3339("2026-11-30T02:53:20+02:00").value(), 1'796'000'000'000'000);
  EXPECT_EQ(ParseRfc3339("2026-11-29").value(), 1'795'910'400'000'000);
}

TEST(TimeFormatTest, RoundTrips) {
  const Micros t = 1'800'000'123'000'000;
  EXPECT_EQ(ParseRfc3339(FormatRfc3339(t)).value(), t);
}

TEST(TimeFormatTest, RejectsGarbage) {
  for (const char* bad : {"", "yesterday", "2026-13-01", "2026-11-31", "2026-02-29", "2026-11-29T25:00:00Z",
                          "2026-11-29T01:33:20", "2026-11-29T01:33:20Zjunk", "2026-11-29T01:33:20.Z"}) {
    StatusOr<Micros> r = ParseRfc3339(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace tessera
