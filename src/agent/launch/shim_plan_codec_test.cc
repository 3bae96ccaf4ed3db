#include "agent/launch/shim_plan_codec.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tessera {
namespace {

ShimPlan SamplePlan() {
  ShimPlan plan;
  plan.argv_storage = {"/bin/sh", "-c", "echo 'a b'", ""};
  plan.env_storage = {"PATH=/usr/bin", "EMPTY="};
  plan.candidates = {"/bin/sh"};
  plan.working_dir = "/work dir";
  plan.cpu_mask = {0x5UL, ~0UL};
  plan.set_ids = true;
  plan.check_uid = true;
  plan.uid = 4294967294U;
  plan.gid = 1001;
  plan.state_file = "/s/1.0.1.task";
  plan.cgroup_kill = "/cg/cgroup.kill";
  plan.cgroup_procs = "/cg/cgroup.procs";
  plan.hidden_source = "/s/hidden-device";
  plan.hidden = {"/dev/nvidia1", "/dev/nvidia-caps/nvidia-cap12"};
  plan.lease_file = "/lease";
  plan.lease_ns = 30'000'000'000;
  return plan;
}

TEST(ShimPlanCodecTest, EveryFieldRoundTrips) {
  ShimPlan in = SamplePlan();
  ShimPlan out;
  bool cgroup = true;
  ASSERT_TRUE(DecodeShimPlan(EncodeShimPlan(in), &out, &cgroup).ok());
  EXPECT_FALSE(cgroup);  // `in` has no cgroup descriptor open
  EXPECT_EQ(out.argv_storage, in.argv_storage);
  EXPECT_EQ(out.env_storage, in.env_storage);
  EXPECT_EQ(out.candidates, in.candidates);
  EXPECT_EQ(out.working_dir, in.working_dir);
  EXPECT_EQ(out.cpu_mask, in.cpu_mask);
  EXPECT_TRUE(out.set_ids);
  EXPECT_TRUE(out.check_uid);
  EXPECT_EQ(out.uid, in.uid);
  EXPECT_EQ(out.gid, in.gid);
  EXPECT_EQ(out.state_file, in.state_file);
  EXPECT_EQ(out.cgroup_kill, in.cgroup_kill);
  EXPECT_EQ(out.cgroup_procs, in.cgroup_procs);
  EXPECT_EQ(out.hidden_source, in.hidden_source);
  EXPECT_EQ(out.hidden, in.hidden);
  EXPECT_EQ(out.lease_file, in.lease_file);
  EXPECT_EQ(out.lease_ns, in.lease_ns);
  // The pointer arrays point into the decoded plan's own storage, null-terminated.
  ASSERT_EQ(out.argv.size(), in.argv_storage.size() + 1);
  EXPECT_EQ(out.argv.back(), nullptr);
  EXPECT_EQ(out.argv[2], out.argv_storage[2].data());
  EXPECT_STREQ(out.argv[2], "echo 'a b'");
  ASSERT_EQ(out.envp.size(), in.env_storage.size() + 1);
  EXPECT_EQ(out.envp.back(), nullptr);
  EXPECT_STREQ(out.envp[1], "EMPTY=");
}

TEST(ShimPlanCodecTest, TruncatedOrAlteredBytesAreRefused) {
  const std::string bytes = EncodeShimPlan(SamplePlan());
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    ShimPlan out;
    bool cgroup = false;
    EXPECT_FALSE(DecodeShimPlan(bytes.substr(0, cut), &out, &cgroup).ok()) << cut;
  }
  ShimPlan out;
  bool cgroup = false;
  EXPECT_FALSE(DecodeShimPlan(bytes + "x", &out, &cgroup).ok());
  std::string other_build = bytes;
  other_build[0] ^= 1;  // the magic number: another build's encoding
  EXPECT_FALSE(DecodeShimPlan(other_build, &out, &cgroup).ok());
  std::string huge_count = bytes;
  std::memset(&huge_count[8], 0xff, 8);  // argv's count
  EXPECT_FALSE(DecodeShimPlan(huge_count, &out, &cgroup).ok());
}

}  // namespace
}  // namespace tessera
