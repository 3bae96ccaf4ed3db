#include "api/node_labels.h"

#include <algorithm>
#include <set>

#include "base/strings.h"

namespace tessera {
namespace {

constexpr size_t kMaxKey = 63;
constexpr size_t kMaxValue = 128;

bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsLower(c) || IsDigit(c) || (c >= 'A' && c <= 'Z'); }

std::string Shown(std::string_view key, std::string_view value) {
  std::string s = std::string(key.substr(0, 64)) + "=" + std::string(value.substr(0, 64));
  for (char& c : s) {
    if (c < ' ' || c >= 0x7f) {
      c = '?';  // the message stays printable whatever the input
    }
  }
  return "label '" + s + "': ";
}

}  // namespace

Status ValidateNodeLabel(std::string_view key, std::string_view value) {
  if (key.empty() || key.size() > kMaxKey) {
    return InvalidArgumentError(Shown(key, value) + "the key must be 1 to " +
                                std::to_string(kMaxKey) + " characters");
  }
  const bool key_chars = std::all_of(key.begin(), key.end(), [](char c) {
    return IsLower(c) || IsDigit(c) || c == '-' || c == '_' || c == '.';
  });
  if (!key_chars || !IsLower(key.front()) || !(IsLower(key.back()) || IsDigit(key.back()))) {
    return InvalidArgumentError(Shown(key, value) +
                                "a key is lowercase letters, digits, '-', '_' or '.', starting "
                                "with a letter and ending with a letter or digit");
  }
  if (key == "node" || key == "name" || key.starts_with("tessera")) {
    return InvalidArgumentError(Shown(key, value) + "the key '" + std::string(key) +
                                "' is reserved");
  }
  if (value.empty() || value.size() > kMaxValue) {
    return InvalidArgumentError(Shown(key, value) + "the value must be 1 to " +
                                std::to_string(kMaxValue) + " characters");
  }
  const bool value_chars = std::all_of(value.begin(), value.end(), [](char c) {
    return IsAlnum(c) || c == '-' || c == '_' || c == '.' || c == ':' || c == '/';
  });
  if (!value_chars || !IsAlnum(value.front())) {
    return InvalidArgumentError(Shown(key, value) +
                                "a value is letters, digits, '-', '_', '.', ':' or '/', starting "
                                "with a letter or digit");
  }
  return Status::Ok();
}

Status ValidateNodeLabels(const NodeLabels& labels) {
  if (labels.size() > kMaxNodeLabels) {
    return InvalidArgumentError("labels: at most " + std::to_string(kMaxNodeLabels) +
                                " labels, got " + std::to_string(labels.size()));
  }
  std::set<std::string_view> keys;
  for (const auto& [k, v] : labels) {
    TESSERA_RETURN_IF_ERROR(ValidateNodeLabel(k, v));
    if (!keys.insert(k).second) {
      return InvalidArgumentError(Shown(k, v) + "the key '" + k + "' is given twice");
    }
  }
  return Status::Ok();
}

StatusOr<NodeLabels> ParseNodeLabelArgs(const std::vector<std::string>& args) {
  NodeLabels labels;
  for (const std::string& arg : args) {
    for (std::string_view item : Split(arg, ',')) {
      item = Trim(item);
      const size_t eq = item.find('=');
      if (eq == std::string_view::npos) {
        return InvalidArgumentError("--label '" + std::string(item.substr(0, 64)) +
                                    "': expected key=value, e.g. rack=r1");
      }
      labels.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
    }
  }
  std::stable_sort(labels.begin(), labels.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (Status s = ValidateNodeLabels(labels); !s.ok()) {
    return InvalidArgumentError("--label: " + s.message());
  }
  return labels;
}

std::string FormatNodeLabels(const NodeLabels& labels) {
  std::string out;
  for (const auto& [k, v] : labels) {
    out += (out.empty() ? "" : ",") + k + "=" + v;
  }
  return out;
}

std::string MetricLabelName(std::string_view key) {
  std::string name(key);
  for (char& c : name) {
    if (!(IsAlnum(c) || c == '_')) {
      c = '_';
    }
  }
  return name;
}

}  // namespace tessera
