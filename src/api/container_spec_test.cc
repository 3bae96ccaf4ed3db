#include "api/container_spec.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

std::string Normal(std::string_view text) {
  StatusOr<std::string> out = NormalizeImageReference(text);
  return out.ok() ? *out : "error: " + out.status().message();
}

TEST(ImageReferenceTest, ShortNamesAreDockerHubsAndTagsDefaultToLatest) {
  EXPECT_EQ(Normal("ubuntu"), "docker.io/library/ubuntu:latest");
  EXPECT_EQ(Normal("ubuntu:22.04"), "docker.io/library/ubuntu:22.04");
  EXPECT_EQ(Normal("pytorch/pytorch:2.3.0-cuda12.1"), "docker.io/pytorch/pytorch:2.3.0-cuda12.1");
  EXPECT_EQ(Normal("nvcr.io/nvidia/pytorch:24.05-py3"), "nvcr.io/nvidia/pytorch:24.05-py3");
  EXPECT_EQ(Normal("localhost/tt"), "localhost/tt:latest");
  EXPECT_EQ(Normal("127.0.0.1:5000/team/img:v1"), "127.0.0.1:5000/team/img:v1");
  const std::string digest = "sha256:" + std::string(64, 'a');
  EXPECT_EQ(Normal("127.0.0.1:5000/img@" + digest), "127.0.0.1:5000/img@" + digest);
  EXPECT_EQ(Normal("img:v2@" + digest), "docker.io/library/img:v2@" + digest);
}

TEST(ImageReferenceTest, PyxisWritesTheRegistryApartWithAHash) {
  EXPECT_EQ(Normal("nvcr.io#nvidia/pytorch:24.05-py3"), "nvcr.io/nvidia/pytorch:24.05-py3");
  EXPECT_EQ(Normal("127.0.0.1:5000#img"), "127.0.0.1:5000/img:latest");
  EXPECT_NE(Normal("nvcr.io/nvidia#pytorch").find("'#'"), std::string::npos);
}

TEST(ImageReferenceTest, BadReferencesSayWhy) {
  EXPECT_NE(Normal("").find("empty"), std::string::npos);
  EXPECT_NE(Normal("Ubuntu").find("lower-case"), std::string::npos);
  EXPECT_NE(Normal("ubuntu:").find("tag"), std::string::npos);
  EXPECT_NE(Normal("ubuntu:-x").find("tag"), std::string::npos);
  EXPECT_NE(Normal("ubuntu@sha256:abc").find("digest"), std::string::npos);
  EXPECT_NE(Normal("a..b/c").find("registry"), std::string::npos);
  EXPECT_NE(Normal("host:99999x/c").find("error"), std::string::npos);
  EXPECT_NE(Normal("a//b").find("component"), std::string::npos);
  EXPECT_NE(Normal("a/b c").find("error"), std::string::npos);
  EXPECT_NE(Normal("a/-b").find("component"), std::string::npos);
  EXPECT_NE(Normal(std::string(600, 'a')).find("longer"), std::string::npos);
}

TEST(ContainerMountTest, ReadOnlyUnlessRwAndTheTargetDefaultsToTheSource) {
  StatusOr<ContainerMount> m = ParseContainerMount("/data/imagenet");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, (ContainerMount{"/data/imagenet", "/data/imagenet", true}));
  m = ParseContainerMount("/scratch/me/:/scratch:rw");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, (ContainerMount{"/scratch/me", "/scratch", false}));
  EXPECT_EQ(ContainerMountText(*m), "/scratch/me:/scratch:rw");
  m = ParseContainerMount("/a//b/./c:/x:ro");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->source, "/a/b/c");
}

TEST(ContainerMountTest, RefusesRelativeEscapingAndReservedPaths) {
  for (const char* bad : {"data:/data", "/data:data", "/a/../etc:/x", "/a:/b:rx", "/a:/b:ro:x",
                          "/a:/proc", "/a:/dev/nvidia0", "/a:/sys/fs", "/a:/", "/a,b:/c", ""}) {
    EXPECT_FALSE(ParseContainerMount(bad).ok()) << bad;
  }
  EXPECT_TRUE(ParseContainerMount("/a:/devices").ok());  // only /dev itself and below
}

TEST(ContainerSpecTest, ValidateWantsNormalisedValuesAndDistinctTargets) {
  ContainerSpec spec;
  EXPECT_TRUE(ValidateContainerSpec(spec).ok());
  spec.workdir = "/w";
  EXPECT_FALSE(ValidateContainerSpec(spec).ok());  // container settings without an image
  spec.image = "ubuntu";
  EXPECT_NE(ValidateContainerSpec(spec).message().find("normalised"), std::string::npos);
  spec.image = "docker.io/library/ubuntu:latest";
  EXPECT_TRUE(ValidateContainerSpec(spec).ok());
  spec.mounts = {{"/a", "/x", true}, {"/b", "/x", true}};
  EXPECT_NE(ValidateContainerSpec(spec).message().find("two mounts"), std::string::npos);
  spec.mounts = {{"/a/", "/x", true}};
  EXPECT_FALSE(ValidateContainerSpec(spec).ok());
  spec.mounts = {{"/a", "/x", true}};
  spec.workdir = "relative";
  EXPECT_FALSE(ValidateContainerSpec(spec).ok());
}

}  // namespace
}  // namespace tessera
