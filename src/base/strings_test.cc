#include "base/strings.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(StringsTest, FixedDecimalPrintsTheGivenPlaces) {
  EXPECT_EQ(FixedDecimal(12.5, 2), "12.50");
  EXPECT_EQ(FixedDecimal(0.125, 0), "0");
  EXPECT_EQ(FixedDecimal(-3.14159, 3), "-3.142");
  EXPECT_EQ(FixedDecimal(1.0, 12), "1.000000000");  // at most 9 places
}

TEST(StringsTest, SplitKeepsEmptyFields) {
  auto parts = Split("a,,b,", ',');
  ASSERT_EQ(parts.size(), 4U);
  EXPECT_EQ(parts[0], "a");
  EXPECT_EQ(parts[1], "");
  EXPECT_EQ(parts[2], "b");
  EXPECT_EQ(parts[3], "");
}

TEST(StringsTest, TrimAndAffixes) {
  EXPECT_EQ(Trim("  x y \r\n"), "x y");
  EXPECT_EQ(Trim("   "), "");
  EXPECT_TRUE(StartsWith("openb_pod_list_default.csv", "openb_pod_list_"));
  EXPECT_TRUE(EndsWith("openb_pod_list_default.csv", ".csv"));
  EXPECT_FALSE(EndsWith("csv", ".csv"));
}

TEST(StringsTest, CountOccurrencesCountsOverlappingOnesAndNothingForEmpty) {
  EXPECT_EQ(CountOccurrences("daemon pid=1\ndaemon pid=2\n", "daemon pid="), 2);
  EXPECT_EQ(CountOccurrences("aaaa", "aa"), 3);
  EXPECT_EQ(CountOccurrences("abc", "x"), 0);
  EXPECT_EQ(CountOccurrences("abc", ""), 0);
}

TEST(StringsTest, ParseInt64IsStrict) {
  EXPECT_EQ(*ParseInt64(" 42 "), 42);
  EXPECT_EQ(*ParseInt64("-7"), -7);
  EXPECT_FALSE(ParseInt64("4x").ok());
  EXPECT_FALSE(ParseInt64("").ok());
  EXPECT_FALSE(ParseInt64("1.5").ok());
  EXPECT_FALSE(ParseInt64("99999999999999999999").ok());
}

TEST(StringsTest, ParseIntListRangesAndItems) {
  auto v = ParseIntList("42-44,7");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<int64_t>{42, 43, 44, 7}));
  EXPECT_FALSE(ParseIntList("51-42").ok());
  EXPECT_FALSE(ParseIntList("a-b").ok());
  EXPECT_FALSE(ParseIntList("").ok());
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(AsciiLowerTest, LowersOnlyAsciiLetters) {
  EXPECT_EQ(AsciiLower("H100-80GB Gi"), "h100-80gb gi");
  EXPECT_EQ(AsciiLower("\xC3\x89t\xC3\xA9"), "\xC3\x89t\xC3\xA9");  // UTF-8 left as is
  EXPECT_EQ(AsciiLower(""), "");
}

}  // namespace
}  // namespace tessera
