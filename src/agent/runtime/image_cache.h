// The node's image cache bound: which images to remove, least recently used first, so
// that what the store holds fits a size bound. Pure: the runtime lists the store and
// removes what this plans (container_runtime.h).
//
// Sizes are Podman's per image; layers two images share count in both, so the sum
// overstates the disk used and the bound is kept with room to spare. An image a task
// uses now is never planned for removal, even if the bound cannot be kept without it.
// Thread safety: plain values and a pure function.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tessera {

struct CachedImage {
  std::string id;                  // Podman's image id
  std::vector<std::string> names;  // the references it is known by
  int64_t size_bytes = 0;
};

// The ids to remove, in order, so that the rest sums to at most `bound_bytes`: images
// none of whose names is in `in_use`, least recently used first (`last_use`: a name ->
// a sequence number, higher is more recent; a name not there was not used since the
// agent started and goes first), ties by id.
std::vector<std::string> PlanImageEvictions(const std::vector<CachedImage>& images,
                                            const std::map<std::string, uint64_t>& last_use,
                                            const std::set<std::string>& in_use,
                                            int64_t bound_bytes);

}  // namespace tessera
