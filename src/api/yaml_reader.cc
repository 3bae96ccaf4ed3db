#include "api/yaml_reader.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <sstream>

#include "base/strings.h"

namespace tessera {

namespace {

// Receives parser events and drops them.
class IgnoreEvents final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& /*mark*/) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& /*mark*/, YAML::anchor_t /*anchor*/) override {}
  void OnAlias(const YAML::Mark& /*mark*/, YAML::anchor_t /*anchor*/) override {}
  void OnScalar(const YAML::Mark& /*mark*/, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                const std::string& /*value*/) override {}
  void OnSequenceStart(const YAML::Mark& /*mark*/, const std::string& /*tag*/,
                       YAML::anchor_t /*anchor*/, YAML::EmitterStyle::value /*style*/) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& /*mark*/, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                  YAML::EmitterStyle::value /*style*/) override {}
  void OnMapEnd() override {}
};

}  // namespace

int YamlReader::CountDocuments(const std::string& text, int limit) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  IgnoreEvents ignore;
  int documents = 0;
  while (documents < limit && parser.HandleNextDocument(ignore)) {
    ++documents;
  }
  return documents;
}

std::string YamlReader::At(const YAML::Node& node) {
  return node.IsDefined() ? At(node.Mark()) : "";
}

std::string YamlReader::At(const YAML::Mark& mark) {
  if (mark.is_null()) {
    return "";
  }
  return " (line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ")";
}

int YamlReader::LineOf(const YAML::Node& node) {
  if (!node.IsDefined() || node.Mark().is_null()) {
    return 0;
  }
  return node.Mark().line + 1;
}

std::string YamlReader::Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Undefined:
      break;
  }
  return "an undefined node";
}

Status YamlReader::Error(std::string_view path, const YAML::Node& node,
                         std::string_view message) const {
  std::string out;
  if (!file_.empty()) {
    out = file_ + ": ";
  }
  if (!path.empty()) {
    out += std::string(path) + ": ";
  }
  out += message;
  out += At(node);
  return InvalidArgumentError(std::move(out));
}

Status YamlReader::ForEachKey(const YAML::Node& map, const std::string& path,
                              const std::vector<std::string_view>& allowed,
                              const KeyVisit& visit) const {
  if (!map.IsMap()) {
    return Error(path, map, "expected a map, got " + Describe(map));
  }
  std::vector<std::string> seen;
  for (const auto& entry : map) {
    // Copies: the iterator hands out a temporary pair of handles.
    const YAML::Node key = entry.first;
    const YAML::Node value = entry.second;
    if (!key.IsScalar()) {
      return Error(path, key, "expected a plain key, got " + Describe(key));
    }
    const std::string& name = key.Scalar();
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::vector<std::string> expected(allowed.begin(), allowed.end());
      return Error(path, key,
                   "unknown key '" + name + "'; expected one of " + Join(expected, ", "));
    }
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      return Error(path, key, "key '" + name + "' appears twice");
    }
    seen.push_back(name);
    TESSERA_RETURN_IF_ERROR(visit(name, value, path.empty() ? name : path + "." + name));
  }
  return Status::Ok();
}

Status YamlReader::ForEachEntry(const YAML::Node& list, const std::string& path,
                                const EntryVisit& visit) const {
  if (list.IsNull()) {
    return Status::Ok();
  }
  if (!list.IsSequence()) {
    return Error(path, list, "expected a list, got " + Describe(list));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    TESSERA_RETURN_IF_ERROR(visit(YAML::Node(list[i]), path + "[" + std::to_string(i) + "]"));
  }
  return Status::Ok();
}

StatusOr<std::string> YamlReader::String(const YAML::Node& node, const std::string& path) const {
  if (node.IsNull()) {
    return std::string();
  }
  if (!node.IsScalar()) {
    return Error(path, node, "expected a string, got " + Describe(node));
  }
  return node.Scalar();
}

StatusOr<int64_t> YamlReader::Int(const YAML::Node& node, const std::string& path) const {
  if (!node.IsScalar()) {
    return Error(path, node, "expected an integer, got " + Describe(node));
  }
  StatusOr<int64_t> value = ParseInt64(node.Scalar());
  if (!value.ok()) {
    return Error(path, node, value.status().message());
  }
  return *value;
}

StatusOr<int64_t> YamlReader::NonNegative(const YAML::Node& node, const std::string& path) const {
  TESSERA_ASSIGN_OR_RETURN(int64_t v, Int(node, path));
  if (v < 0) {
    return Error(path, node, "must not be negative, got " + std::to_string(v));
  }
  return v;
}

StatusOr<bool> YamlReader::Bool(const YAML::Node& node, const std::string& path) const {
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    if (s == "true" || s == "yes") {
      return true;
    }
    if (s == "false" || s == "no") {
      return false;
    }
  }
  return Error(path, node, "expected true or false, got " + Describe(node));
}

StatusOr<std::vector<std::string>> YamlReader::Strings(const YAML::Node& node,
                                                       const std::string& path) const {
  std::vector<std::string> out;
  TESSERA_RETURN_IF_ERROR(ForEachEntry(node, path, [&](const YAML::Node& e, const std::string& p) {
    TESSERA_ASSIGN_OR_RETURN(std::string s, String(e, p));
    out.push_back(std::move(s));
    return Status::Ok();
  }));
  return out;
}

}  // namespace tessera
