#include "cli/table.h"

#include <gtest/gtest.h>

#include <string>

#include "base/time_format.h"

namespace tessera {
namespace {

constexpr Micros kSecond = 1'000'000;
constexpr Micros kMinute = 60 * kSecond;
constexpr Micros kHour = 60 * kMinute;
constexpr Micros kDay = 24 * kHour;

TEST(TableTest, PadsColumnsToTheWidestCellTwoSpacesApart) {
  Table t({"ID", "NAME", "STATE"});
  t.AddRow({"1", "train", "running"});
  t.AddRow({"42", "a-much-longer-name", "pending"});
  EXPECT_EQ(t.Render(),
            "ID  NAME                STATE\n"
            "1   train               running\n"
            "42  a-much-longer-name  pending\n");
}

TEST(TableTest, RightAlignedColumnsPadOnTheLeft) {
  Table t({"ID", "GPUS"});
  t.SetRightAligned(0);
  t.SetRightAligned(1);
  t.AddRow({"7", "16"});
  t.AddRow({"1234", "0.5"});
  EXPECT_EQ(t.Render(),
            "  ID  GPUS\n"
            "   7    16\n"
            "1234   0.5\n");
}

TEST(TableTest, TruncatesLongCellsToTheMaximumWidth) {
  Table t({"NAME", "REASON"});
  t.SetMaxWidth(0, 8);
  t.AddRow({"llama-70b-finetune", "quota"});
  t.AddRow({"short", "x"});
  EXPECT_EQ(t.Render(),
            "NAME      REASON\n"
            "llama...  quota\n"
            "short     x\n");
}

TEST(TableTest, MissingCellsAreEmptyAndTrailingSpacesAreTrimmed) {
  Table t({"A", "B", "C"});
  t.AddRow({"x"});
  t.AddRow({"y", "", "z", "dropped"});
  EXPECT_EQ(t.Render(),
            "A  B  C\n"
            "x\n"
            "y     z\n");
  EXPECT_EQ(t.rows(), 2u);
}

TEST(TableTest, WidthsCountCodePointsNotBytes) {
  Table t({"NAME", "X"});
  t.AddRow({"café", "1"});  // 5 bytes, 4 code points
  t.AddRow({"abcde", "2"});
  EXPECT_EQ(t.Render(),
            "NAME   X\n"
            "café   1\n"
            "abcde  2\n");
}

TEST(TruncateTest, KeepsShortTextAndCutsAtCodePoints) {
  EXPECT_EQ(Truncate("short", 5), "short");
  EXPECT_EQ(Truncate("longer", 5), "lo...");
  EXPECT_EQ(Truncate("longer", 3), "lon");
  EXPECT_EQ(Truncate("ééééé", 4), "é...");
  EXPECT_EQ(DisplayWidth("ééé"), 3u);
  EXPECT_EQ(Truncate("", 0), "");
}

TEST(FormatAgeTest, CompactUnits) {
  EXPECT_EQ(FormatAge(-5 * kSecond), "0s");
  EXPECT_EQ(FormatAge(0), "0s");
  EXPECT_EQ(FormatAge(45 * kSecond + 999'999), "45s");
  EXPECT_EQ(FormatAge(kMinute), "1m");
  EXPECT_EQ(FormatAge(5 * kMinute + 3 * kSecond), "5m3s");
  EXPECT_EQ(FormatAge(42 * kMinute + 10 * kSecond), "42m");
  EXPECT_EQ(FormatAge(3 * kHour), "3h");
  EXPECT_EQ(FormatAge(3 * kHour + 5 * kMinute), "3h5m");
  EXPECT_EQ(FormatAge(2 * kDay + 4 * kHour + 7 * kMinute), "2d4h");
  EXPECT_EQ(FormatAge(2 * kDay), "2d");
  EXPECT_EQ(FormatAge(45 * kDay + 3 * kHour), "45d");
}

TEST(FormatQuantityTest, MilliAsDecimals) {
  EXPECT_EQ(FormatMilli(16000), "16");
  EXPECT_EQ(FormatMilli(500), "0.5");
  EXPECT_EQ(FormatMilli(1234), "1.234");
  EXPECT_EQ(FormatMilli(1), "0.001");
  EXPECT_EQ(FormatMilli(10), "0.01");
  EXPECT_EQ(FormatMilli(0), "0");
  EXPECT_EQ(FormatMilli(-250), "-0.25");
  EXPECT_EQ(FormatMilli(INT64_MIN), "-9223372036854775.808");
}

TEST(FormatQuantityTest, MiBInBinaryUnits) {
  EXPECT_EQ(FormatMiBShort(0), "0MiB");
  EXPECT_EQ(FormatMiBShort(512), "512MiB");
  EXPECT_EQ(FormatMiBShort(1024), "1GiB");
  EXPECT_EQ(FormatMiBShort(1536), "1.5GiB");
  EXPECT_EQ(FormatMiBShort(81920), "80GiB");
  EXPECT_EQ(FormatMiBShort(2 * 1024 * 1024), "2TiB");
  EXPECT_EQ(FormatFixed(12.5, 2), "12.50");
  EXPECT_EQ(FormatFixed(0.0049, 2), "0.00");
}

TEST(TimeTest, TimeArgumentsAreNowDatesTimesOrDurationsAgo) {
  const Micros now = *ParseRfc3339("2026-11-29T21:00:00Z");
  // 2026-11-29 is day 20 786 since the epoch.
  EXPECT_EQ(now, 20786 * kDay + 21 * kHour);
  EXPECT_EQ(*ParseTimeArgument("now", now), now);
  EXPECT_EQ(*ParseTimeArgument(" 2026-11-29T23:00:00+02:00 ", now), now);
  EXPECT_EQ(*ParseTimeArgument("2026-11-01", now), *ParseRfc3339("2026-11-01T00:00:00Z"));
  EXPECT_EQ(*ParseTimeArgument("2026-11-01T12:00:00Z", now), *ParseRfc3339("2026-11-01T12:00:00Z"));
  EXPECT_EQ(*ParseTimeArgument("24h", now), now - kDay);
  EXPECT_EQ(*ParseTimeArgument("90s", now), now - 90 * kSecond);
  EXPECT_EQ(*ParseTimeArgument("30m", now), now - 30 * kMinute);
  EXPECT_EQ(*ParseTimeArgument("7d", now), now - 7 * kDay);
  EXPECT_EQ(*ParseTimeArgument("2w", now), now - 14 * kDay);
  for (const char* bad : {"", "h", "24x", "-3h", "soon", "99999999999999d"}) {
    EXPECT_FALSE(ParseTimeArgument(bad, now).ok()) << bad;
  }
}

TEST(CsvTest, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(CsvField("team-a"), "team-a");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
}

}  // namespace
}  // namespace tessera
