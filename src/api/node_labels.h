// Node labels: key=value pairs an agent reports with its inventory (the admin's
// `tessera agent --label rack=r1,block=b2`, and "nvlink-domain" read from the GPUs'
// fabric where NVML offers it). The scheduler groups nodes by "nvlink-domain", "rack"
// and "block" for gang topology scopes; other keys are shown and exported only.
//
// Syntax: a key is 1 to 63 characters: lowercase letters, digits, '-', '_', '.', starting
// with a letter and ending with a letter or digit. Keys "node" and "name", and keys
// starting with "tessera", are reserved. A value is 1 to 128 characters: letters, digits,
// '-', '_', '.', ':', '/', starting with a letter or digit. A node has at most 64 labels,
// each key once.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tessera {

using NodeLabels = std::vector<std::pair<std::string, std::string>>;

inline constexpr std::string_view kRackLabel = "rack";
inline constexpr std::string_view kBlockLabel = "block";
inline constexpr std::string_view kNvlinkDomainLabel = "nvlink-domain";
inline constexpr size_t kMaxNodeLabels = 64;

// InvalidArgument naming the label ("label 'Rack=r1': ...") when it breaks the syntax.
Status ValidateNodeLabel(std::string_view key, std::string_view value);
// Every label valid, each key once, at most kMaxNodeLabels.
Status ValidateNodeLabels(const NodeLabels& labels);

// Reads `--label` arguments, each one or more "key=value" joined by ','. The result is
// sorted by key. InvalidArgument naming the bad label (no '=', bad syntax, a key twice).
StatusOr<NodeLabels> ParseNodeLabelArgs(const std::vector<std::string>& args);

// "rack=r1,block=b2" (sorted by key as given); "" for none.
std::string FormatNodeLabels(const NodeLabels& labels);

// A Prometheus label name for a label key: '-' and '.' become '_' ("nvlink_domain").
std::string MetricLabelName(std::string_view key);

}  // namespace tessera
