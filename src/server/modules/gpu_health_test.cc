#include "server/modules/gpu_health.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

GpuTelemetry Sample(int temp = 40) {
  GpuTelemetry t;
  t.index = 1;
  t.uuid = "GPU-1";
  t.temp_c = temp;
  return t;
}

TEST(GpuHealthTest, HealthySamplesFindNothing) {
  GpuTelemetry a = Sample(), b = Sample(89);
  EXPECT_FALSE(CheckGpuHealth(nullptr, a, {}).has_value());
  EXPECT_FALSE(CheckGpuHealth(&a, b, {}).has_value());
}

TEST(GpuHealthTest, NewXidDrainsWithItsDescription) {
  GpuTelemetry before = Sample(), after = Sample();
  after.xid_count = 1;
  after.last_xid = 79;
  std::optional<HealthFinding> f = CheckGpuHealth(&before, after, {});
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, HealthKind::kXid);
  EXPECT_EQ(f->reason, "XID 79 (GPU has fallen off the bus)");
  // The same count again is no new event; an unknown code has no description.
  EXPECT_FALSE(CheckGpuHealth(&after, after, {}).has_value());
  GpuTelemetry odd = after;
  odd.xid_count = 2;
  odd.last_xid = 1234;
  ASSERT_TRUE(CheckGpuHealth(&after, odd, {}).has_value());
  EXPECT_EQ(CheckGpuHealth(&after, odd, {})->reason, "XID 1234");
}

TEST(GpuHealthTest, ApplicationXidsAndTheFirstSampleDoNotDrain) {
  GpuTelemetry before = Sample(), after = Sample();
  after.xid_count = 3;
  after.last_xid = 13;
  EXPECT_FALSE(CheckGpuHealth(&before, after, {}).has_value());
  after.last_xid = 48;
  EXPECT_FALSE(CheckGpuHealth(nullptr, after, {}).has_value()) << "no baseline yet";
  EXPECT_TRUE(CheckGpuHealth(&before, after, {}).has_value());
}

TEST(GpuHealthTest, UncorrectableEccDrainsCorrectableDoesNot) {
  GpuTelemetry before = Sample(), after = Sample();
  after.ecc_sbe_volatile = 100;
  EXPECT_FALSE(CheckGpuHealth(&before, after, {}).has_value());
  after.ecc_dbe_volatile = 2;
  std::optional<HealthFinding> f = CheckGpuHealth(&before, after, {});
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->kind, HealthKind::kEcc);
  EXPECT_EQ(f->reason, "2 uncorrectable ECC error(s)");
}

TEST(GpuHealthTest, TemperatureAtTheLimitAndLostGpus) {
  GpuHealthOptions options;
  options.temperature_limit_c = 85;
  std::optional<HealthFinding> hot = CheckGpuHealth(nullptr, Sample(85), options);
  ASSERT_TRUE(hot.has_value());
  EXPECT_EQ(hot->kind, HealthKind::kTemperature);
  EXPECT_EQ(hot->reason, "temperature 85 C (limit 85 C)");
  GpuTelemetry lost = Sample(99);
  lost.lost = true;
  ASSERT_TRUE(CheckGpuHealth(nullptr, lost, options).has_value());
  EXPECT_EQ(CheckGpuHealth(nullptr, lost, options)->kind, HealthKind::kLost);  // first rule wins
}

TEST(GpuHealthTest, KindNamesRoundTrip) {
  for (HealthKind k : {HealthKind::kLost, HealthKind::kXid, HealthKind::kEcc, HealthKind::kTemperature}) {
    EXPECT_EQ(ParseHealthKind(HealthKindName(k)), k);
  }
  EXPECT_FALSE(ParseHealthKind("admin").has_value());
}

}  // namespace
}  // namespace tessera
