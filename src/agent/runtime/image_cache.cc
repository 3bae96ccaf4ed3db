#include "agent/runtime/image_cache.h"

#include <algorithm>
#include <tuple>

namespace tessera {

std::vector<std::string> PlanImageEvictions(const std::vector<CachedImage>& images,
                                            const std::map<std::string, uint64_t>& last_use,
                                            const std::set<std::string>& in_use,
                                            int64_t bound_bytes) {
  int64_t total = 0;
  struct Candidate {
    uint64_t used = 0;
    std::string id;
    int64_t size = 0;
  };
  std::vector<Candidate> candidates;
  for (const CachedImage& image : images) {
    total += image.size_bytes;
    bool busy = false;
    uint64_t used = 0;
    for (const std::string& name : image.names) {
      busy = busy || in_use.count(name) > 0;
      if (auto it = last_use.find(name); it != last_use.end()) {
        used = std::max(used, it->second);
      }
    }
    if (!busy) {
      candidates.push_back({used, image.id, image.size_bytes});
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.used, a.id) < std::tie(b.used, b.id);
  });
  std::vector<std::string> out;
  for (const Candidate& c : candidates) {
    if (total <= bound_bytes) {
      break;
    }
    out.push_back(c.id);
    total -= c.size;
  }
  return out;
}

}  // namespace tessera
