#include "api/units.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "base/testing/time_units.h"

namespace tessera {
namespace {

using testing::kSecond;

int64_t Mem(const std::string& text) {
  StatusOr<int64_t> v = ParseMemoryMiB(text);
  EXPECT_TRUE(v.ok()) << text << ": " << v.status().ToString();
  return v.ok() ? *v : -1;
}

std::string MemError(const std::string& text) {
  StatusOr<int64_t> v = ParseMemoryMiB(text);
  EXPECT_FALSE(v.ok()) << text << " parsed as " << (v.ok() ? *v : 0);
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  return v.status().message();
}

TEST(UnitsTest, MemorySizes) {
  EXPECT_EQ(Mem("20GiB"), 20480);
  EXPECT_EQ(Mem("20Gi"), 20480);
  EXPECT_EQ(Mem("512MiB"), 512);
  EXPECT_EQ(Mem("512Mi"), 512);
  EXPECT_EQ(Mem("1TiB"), 1048576);
  EXPECT_EQ(Mem("1.5GiB"), 1536);
  EXPECT_EQ(Mem("0.25GiB"), 256);
  EXPECT_EQ(Mem("65536"), 65536);
  EXPECT_EQ(Mem("2048KiB"), 2);
  EXPECT_EQ(Mem(" 64 GiB "), 65536);
  EXPECT_EQ(Mem("0"), 0);
  EXPECT_EQ(Mem("1.5000000000000000000000000GiB"), 1536);  // trailing zeros are exact
  // 2^-20 TiB is exactly 1 MiB: 20 fraction digits, still exact.
  EXPECT_EQ(Mem("0.00000095367431640625TiB"), 1);
}

TEST(UnitsTest, MemoryRefusesInexactDecimalAndNegative) {
  EXPECT_NE(MemError("1.5").find("'1.5' is not a whole number of MiB"), std::string::npos);
  EXPECT_NE(MemError("1.0001GiB").find("not a whole number of MiB"), std::string::npos);
  EXPECT_NE(MemError("1KiB").find("not a whole number"), std::string::npos);
  std::string gb = MemError("20GB");
  EXPECT_NE(gb.find("'20GB'"), std::string::npos) << gb;
  EXPECT_NE(gb.find("20GiB"), std::string::npos) << gb;
  EXPECT_NE(MemError("20g").find("20GiB"), std::string::npos);
  EXPECT_NE(MemError("-1GiB").find("must not be negative"), std::string::npos);
  EXPECT_NE(MemError("lots").find("'lots' is not a memory size"), std::string::npos);
  MemError("");
  MemError("GiB");
  MemError("1.2.3GiB");
  MemError("1e3");
  EXPECT_NE(MemError("99999999999999999999TiB").find("too large"), std::string::npos);
  EXPECT_NE(MemError("9007199254740992TiB").find("too large"), std::string::npos);
}

TEST(UnitsTest, CpuAmounts) {
  EXPECT_EQ(*ParseCpuMilli("4"), 4000);
  EXPECT_EQ(*ParseCpuMilli("0.5"), 500);
  EXPECT_EQ(*ParseCpuMilli("500m"), 500);
  EXPECT_EQ(*ParseCpuMilli("0.001"), 1);
  EXPECT_EQ(*ParseCpuMilli("0"), 0);
  StatusOr<int64_t> fine = ParseCpuMilli("0.0005");
  ASSERT_FALSE(fine.ok());
  EXPECT_NE(fine.status().message().find("'0.0005'"), std::string::npos);
  EXPECT_FALSE(ParseCpuMilli("1.5m").ok());
  EXPECT_FALSE(ParseCpuMilli("-1").ok());
  EXPECT_FALSE(ParseCpuMilli("4 cores").ok());
  EXPECT_FALSE(ParseCpuMilli("").ok());
}

TEST(UnitsTest, GpuFractions) {
  EXPECT_EQ(*ParseGpuMilli("0.25"), 250);
  EXPECT_EQ(*ParseGpuMilli("1"), 1000);
  EXPECT_EQ(*ParseGpuMilli("1.000"), 1000);
  EXPECT_EQ(*ParseGpuMilli(".5"), 500);
  EXPECT_EQ(*ParseGpuMilli("0.001"), 1);
  for (const char* bad : {"0", "0.0", "1.001", "2", "-0.5", "0.0001", "quarter", "", "25%"}) {
    StatusOr<int64_t> v = ParseGpuMilli(bad);
    EXPECT_FALSE(v.ok()) << bad;
    EXPECT_NE(v.status().message().find("'" + std::string(bad) + "'"), std::string::npos)
        << v.status().message();
  }
}

TEST(UnitsTest, Durations) {
  EXPECT_EQ(*ParseDurationMicros("90"), 90 * kSecond);
  EXPECT_EQ(*ParseDurationMicros("30s"), 30 * kSecond);
  EXPECT_EQ(*ParseDurationMicros("5m"), 300 * kSecond);
  EXPECT_EQ(*ParseDurationMicros("4h"), 4 * 3600 * kSecond);
  EXPECT_EQ(*ParseDurationMicros("1d"), 86400 * kSecond);
  EXPECT_EQ(*ParseDurationMicros("1h30m"), 5400 * kSecond);
  EXPECT_EQ(*ParseDurationMicros("250ms"), 250'000);
  EXPECT_EQ(*ParseDurationMicros("10us"), 10);
  EXPECT_EQ(*ParseDurationMicros("1.5h"), 5400 * kSecond);
  EXPECT_EQ(*ParseDurationMicros("0.5"), kSecond / 2);
  EXPECT_EQ(*ParseDurationMicros("1d2h3m4s5ms6us"), ((86400 + 7200 + 180 + 4) * kSecond) + 5006);
  EXPECT_EQ(*ParseDurationMicros("0"), 0);
  for (const char* bad :
       {"", "h", "1h30", "1x", "-5m", "1h1h", "0.0000001s", "1 h", "5min", "9999999999999999d"}) {
    StatusOr<int64_t> v = ParseDurationMicros(bad);
    EXPECT_FALSE(v.ok()) << bad << " -> " << (v.ok() ? *v : 0);
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_NE(ParseDurationMicros("5min").status().message().find("'5min'"), std::string::npos);
}

TEST(UnitsTest, FormattersAreExactAndReadBack) {
  EXPECT_EQ(FormatMiB(20480), "20GiB");
  EXPECT_EQ(FormatMiB(1536), "1536MiB");
  EXPECT_EQ(FormatMiB(1048576), "1TiB");
  EXPECT_EQ(FormatMiB(0), "0MiB");
  EXPECT_EQ(FormatCpuMilli(4000), "4");
  EXPECT_EQ(FormatCpuMilli(1500), "1500m");
  EXPECT_EQ(FormatGpuFraction(250), "0.25");
  EXPECT_EQ(FormatGpuFraction(1000), "1");
  EXPECT_EQ(FormatGpuFraction(5), "0.005");
  EXPECT_EQ(FormatDuration(5400 * kSecond), "1h30m");
  EXPECT_EQ(FormatDuration(45 * kSecond), "45s");
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(2 * 86400 * kSecond), "2d");
  EXPECT_EQ(FormatDuration(kSecond + 500'000), "1s500ms");
  EXPECT_EQ(FormatDuration(1), "1us");
  EXPECT_EQ(FormatDuration(-45 * kSecond), "-45s");

  for (int64_t mib : {int64_t{1}, int64_t{1023}, int64_t{1024}, int64_t{1536}, int64_t{1048576},
                      int64_t{3} * 1048576 + 1024, std::numeric_limits<int64_t>::max()}) {
    EXPECT_EQ(*ParseMemoryMiB(FormatMiB(mib)), mib) << FormatMiB(mib);
  }
  for (int64_t us : {int64_t{1}, int64_t{999}, int64_t{1000}, kSecond, 5400 * kSecond,
                     86400 * kSecond + 1, std::numeric_limits<int64_t>::max()}) {
    EXPECT_EQ(*ParseDurationMicros(FormatDuration(us)), us) << FormatDuration(us);
  }
  for (int64_t milli : {1, 250, 999, 1000}) {
    EXPECT_EQ(*ParseGpuMilli(FormatGpuFraction(milli)), milli);
  }
  for (int64_t milli : {0, 1, 500, 1000, 64000}) {
    EXPECT_EQ(*ParseCpuMilli(FormatCpuMilli(milli)), milli);
  }
}

TEST(UnitsTest, ScaledDecimal) {
  EXPECT_EQ(*ParseScaledDecimal("1.5", 1024), 1536);
  EXPECT_EQ(*ParseScaledDecimal("3", 1, 3), 1);
  EXPECT_FALSE(ParseScaledDecimal("1", 1, 3).ok());
  EXPECT_FALSE(ParseScaledDecimal("", 1).ok());
  EXPECT_FALSE(ParseScaledDecimal(".", 1).ok());
  EXPECT_EQ(*ParseScaledDecimal("9223372036854775807", 1), std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(ParseScaledDecimal("9223372036854775808", 1).ok());
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(UnitsTest, SlurmMemoryIsBinaryWithMiBByDefault) {
  EXPECT_EQ(ParseSlurmMemoryMiB("4G").value(), 4096);
  EXPECT_EQ(ParseSlurmMemoryMiB("4g").value(), 4096);
  EXPECT_EQ(ParseSlurmMemoryMiB("512M").value(), 512);
  EXPECT_EQ(ParseSlurmMemoryMiB("4096").value(), 4096);
  EXPECT_EQ(ParseSlurmMemoryMiB("1T").value(), 1048576);
  EXPECT_EQ(ParseSlurmMemoryMiB("1.5G").value(), 1536);
  EXPECT_EQ(ParseSlurmMemoryMiB("1024K").value(), 1);
  EXPECT_EQ(ParseSlurmMemoryMiB("1025K").value(), 2);  // rounded up, as Slurm does
  EXPECT_EQ(ParseSlurmMemoryMiB("0").value(), 0);
  for (const char* bad : {"4GB", "4GiB", "-1G", "G", "", "lots", "4X"}) {
    StatusOr<int64_t> v = ParseSlurmMemoryMiB(bad);
    EXPECT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseSlurmMemoryMiB("4X").status().message().find("'4X'"), std::string::npos);
}

TEST(UnitsTest, SlurmTimeFormats) {
  auto secs = [](const std::string& text) -> int64_t {
    StatusOr<std::optional<Micros>> v = ParseSlurmTime(text);
    EXPECT_TRUE(v.ok()) << text << ": " << v.status().ToString();
    if (!v.ok() || !v->has_value()) {
      return -1;
    }
    return **v / kSecond;
  };
  EXPECT_EQ(secs("90"), 90 * 60);            // minutes
  EXPECT_EQ(secs("5:30"), 5 * 60 + 30);      // M:S
  EXPECT_EQ(secs("1:00:00"), 3600);          // H:M:S
  EXPECT_EQ(secs("2-0"), 2 * 86400);         // D-H
  EXPECT_EQ(secs("1-2"), 86400 + 2 * 3600);  // D-H
  EXPECT_EQ(secs("1-2:30"), 86400 + 2 * 3600 + 30 * 60);
  EXPECT_EQ(secs("1-02:30:15"), 86400 + 2 * 3600 + 30 * 60 + 15);
  EXPECT_EQ(secs("48:00:00"), 48 * 3600);
  for (const char* none : {"UNLIMITED", "infinite", "0", "0:00:00"}) {
    StatusOr<std::optional<Micros>> v = ParseSlurmTime(none);
    ASSERT_TRUE(v.ok()) << none;
    EXPECT_FALSE(v->has_value()) << none;
  }
  for (const char* bad : {"", "1h", "1:2:3:4", "-1", "1-", "a-1", "1::2", "1:-2", "1.5", "1-2-3"}) {
    StatusOr<std::optional<Micros>> v = ParseSlurmTime(bad);
    EXPECT_FALSE(v.ok()) << bad;
  }
  EXPECT_NE(ParseSlurmTime("1h").status().message().find("'1h' is not a Slurm time"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera
