#include "base/quantity.h"

#include <gtest/gtest.h>

#include <type_traits>

#include "base/strong_id.h"

namespace tessera {
namespace {

TEST(QuantityTest, ArithmeticAndOrder) {
  MilliGpu a(250);
  MilliGpu b(750);
  EXPECT_EQ((a + b).value(), 1000);
  EXPECT_EQ(a + b, kWholeGpu);
  EXPECT_LT(a, b);
  a += MilliGpu(100);
  EXPECT_EQ(a.value(), 350);
  EXPECT_EQ((b - a).value(), 400);
  EXPECT_EQ(ToString(MiB(20480)), "20480 MiB");
}

TEST(QuantityTest, KindsDoNotMix) {
  static_assert(!std::is_convertible_v<int64_t, MilliGpu>, "explicit construction only");
  static_assert(!std::is_convertible_v<MiB, MilliGpu>, "units do not convert");
  static_assert(!std::is_convertible_v<NodeId, JobId>, "ids do not convert");
  EXPECT_FALSE(NodeId().valid());
  EXPECT_TRUE(NodeId(0).valid());
  EXPECT_LT(NodeId(1), NodeId(2));
}

}  // namespace
}  // namespace tessera
