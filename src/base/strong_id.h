// StrongId<Tag>: an integer id that does not mix with ids of other kinds.
//
// NodeId{3} and GpuIndex{3} are different types, so passing one where the other is
// expected does not compile. Ids are dense indexes assigned by their owner (the cluster
// state numbers its nodes 0..n-1), which keeps lookups to a vector index.
// Thread safety: values.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>

namespace tessera {

template <typename Tag, typename Rep = uint32_t>
class StrongId {
 public:
  using rep_type = Rep;
  static constexpr Rep kInvalidValue = std::numeric_limits<Rep>::max();

  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep value) : value_(value) {}

  constexpr Rep value() const { return value_; }
  constexpr bool valid() const { return value_ != kInvalidValue; }

  constexpr auto operator<=>(const StrongId&) const = default;

 private:
  Rep value_ = kInvalidValue;
};

struct NodeIdTag {};
struct GpuModelIdTag {};
struct JobIdTag {};
struct TaskIdTag {};

using NodeId = StrongId<NodeIdTag>;
// Index of a GPU model in the GpuCatalog.
using GpuModelId = StrongId<GpuModelIdTag, uint16_t>;
using JobId = StrongId<JobIdTag, uint64_t>;
using TaskId = StrongId<TaskIdTag, uint64_t>;

}  // namespace tessera

template <typename Tag, typename Rep>
struct std::hash<tessera::StrongId<Tag, Rep>> {
  size_t operator()(const tessera::StrongId<Tag, Rep>& id) const noexcept {
    return std::hash<Rep>{}(id.value());
  }
};
