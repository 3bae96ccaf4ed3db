#include "cli/job_file_fields.h"

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <regex>
#include <string>

#include "api/job_keys.h"

namespace tessera {

using nlohmann::json;

std::string WithField(const std::string& body, bool is_json, const std::string& key,
                      const json& value) {
  const std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (is_json) {
    const json doc = json::parse(body, nullptr, false);
    if (!doc.is_object() || doc.contains(key)) {
      return body;
    }
    std::string out = body;
    out.insert(body.find('{') + 1, "\"" + key + "\": " + text + (doc.empty() ? "" : ", "));
    const json back = json::parse(out, nullptr, false);
    const bool added = back.is_object() && back.size() == doc.size() + 1 && back.contains(key) &&
                       back[key] == value;
    return added ? out : body;
  }
  try {
    const YAML::Node doc = YAML::Load(body);
    if (!doc.IsMap() || doc.Style() == YAML::EmitterStyle::Flow || doc[key]) {
      return body;
    }
    const std::string out =
        body + (body.empty() || body.back() == '\n' ? "" : "\n") + key + ": " + text + "\n";
    const YAML::Node back = YAML::Load(out);
    const bool added =
        back.IsMap() && back.size() == doc.size() + 1 && back[key] && back[key].IsScalar() &&
        (value.is_boolean() ? back[key].as<bool>() == value.get<bool>()
                            : back[key].Scalar() == value.get<std::string>());
    return added ? out : body;
  } catch (const YAML::Exception&) {
    return body;  // the controller reports the error, with its line
  }
}

namespace {

// As a std::string: yaml-cpp looks keys up by string.
std::string HoldKey() { return std::string(job_keys::kHoldIfUnfit); }

// What the file says: absent, true, false, or unreadable (left to the controller).
enum class Said { kAbsent, kTrue, kFalse, kUnreadable };

Said HoldSaid(const std::string& body, bool is_json) {
  if (is_json) {
    const json doc = json::parse(body, nullptr, false);
    if (!doc.is_object()) {
      return Said::kUnreadable;
    }
    if (!doc.contains(HoldKey())) {
      return Said::kAbsent;
    }
    return doc[HoldKey()] == true ? Said::kTrue : Said::kFalse;
  }
  try {
    const YAML::Node doc = YAML::Load(body);
    if (!doc.IsMap()) {
      return Said::kUnreadable;
    }
    if (!doc[HoldKey()]) {
      return Said::kAbsent;
    }
    bool v = false;
    return doc[HoldKey()].IsScalar() && YAML::convert<bool>::decode(doc[HoldKey()], v) && v
               ? Said::kTrue
               : Said::kFalse;
  } catch (const YAML::Exception&) {
    return Said::kUnreadable;
  }
}

// The one top-level `hold_if_unfit` value rewritten to true in place; "" where the text
// holds no such single occurrence.
std::string SetHoldTrue(const std::string& body, bool is_json) {
  // JSON: `"hold_if_unfit": <scalar>`; YAML: a line `hold_if_unfit: <scalar> [# ...]` at
  // the top level (column 0).
  const std::regex pattern =
      is_json ? std::regex("(\"" + HoldKey() + R"re("\s*:\s*)(false|null|0|"[^"]*"))re")
              : std::regex("(^|\n)(" + HoldKey() + R"re(:[ \t]*)([^#\n]*[^#\s]))re");
  auto begin = std::sregex_iterator(body.begin(), body.end(), pattern);
  if (begin == std::sregex_iterator() || std::next(begin) != std::sregex_iterator()) {
    return "";
  }
  const std::smatch& m = *begin;
  const size_t value = is_json ? 2 : 3;
  std::string out = body;
  out.replace(static_cast<size_t>(m.position(value)), static_cast<size_t>(m.length(value)),
              "true");
  return out;
}

}  // namespace

StatusOr<std::string> WithHoldIfUnfit(const std::string& body, bool is_json) {
  switch (HoldSaid(body, is_json)) {
    case Said::kUnreadable:
      return body;  // the controller reports the error, with its line
    case Said::kTrue:
      return body;
    case Said::kAbsent: {
      std::string out = WithField(body, is_json, HoldKey(), json(true));
      if (out != body) {
        return out;
      }
      break;
    }
    case Said::kFalse: {
      // The command line overrides the file.
      std::string out = SetHoldTrue(body, is_json);
      if (!out.empty() && HoldSaid(out, is_json) == Said::kTrue) {
        return out;
      }
      break;
    }
  }
  return InvalidArgumentError(
      "--hold-if-unfit: cannot set hold_if_unfit: true in this job file (its layout cannot "
      "be changed safely); set hold_if_unfit: true in the file itself");
}

}  // namespace tessera
