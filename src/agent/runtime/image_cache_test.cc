#include "agent/runtime/image_cache.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(ImageCacheTest, RemovesTheLeastRecentlyUsedUntilTheRestFits) {
  const std::vector<CachedImage> images = {
      {"a", {"r/a:1"}, 400}, {"b", {"r/b:1"}, 300}, {"c", {"r/c:1", "r/c:latest"}, 200}};
  // c used last (through either name), then a, then b.
  const std::map<std::string, uint64_t> used = {{"r/a:1", 5}, {"r/b:1", 2}, {"r/c:latest", 9}};
  EXPECT_EQ(PlanImageEvictions(images, used, {}, 900), std::vector<std::string>{});
  EXPECT_EQ(PlanImageEvictions(images, used, {}, 899), std::vector<std::string>{"b"});
  EXPECT_EQ(PlanImageEvictions(images, used, {}, 500), (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(PlanImageEvictions(images, used, {}, 0), (std::vector<std::string>{"b", "a", "c"}));
}

TEST(ImageCacheTest, NeverRemovesAnImageInUseAndUnknownOnesGoFirst) {
  const std::vector<CachedImage> images = {
      {"a", {"r/a:1"}, 400}, {"b", {"r/b:1"}, 300}, {"z", {"r/z:1"}, 100}};
  const std::map<std::string, uint64_t> used = {{"r/a:1", 5}, {"r/b:1", 2}};
  // z was not used since the agent started: it goes before b.
  EXPECT_EQ(PlanImageEvictions(images, used, {"r/b:1"}, 450), (std::vector<std::string>{"z", "a"}));
  // Everything in use: nothing to remove, even past the bound.
  EXPECT_TRUE(PlanImageEvictions(images, used, {"r/a:1", "r/b:1", "r/z:1"}, 0).empty());
}

}  // namespace
}  // namespace tessera
