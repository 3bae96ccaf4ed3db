#include "api/queue_config.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "api/queue_idle.h"
#include "api/queue_limits.h"
#include "api/queue_resource_defaults.h"
#include "api/yaml_reader.h"
#include "base/strings.h"

namespace tessera {
namespace {

const YamlReader kYaml;

// Units per kind: the scale of a bare number, and the accepted suffixes.
struct QuotaUnit {
  std::string_view suffix;
  int64_t scale;  // ledger units per 1 of the suffixed number
};

std::vector<QuotaUnit> UnitsOf(ResourceKind kind) {
  switch (kind) {
    case ResourceKind::kGpu:
    case ResourceKind::kCpu:
      return {{"", 1000}, {"m", 1}};
    case ResourceKind::kGpuMemory:
    case ResourceKind::kMemory:
      return {{"", 1}, {"Mi", 1}, {"Gi", 1024}, {"Ti", int64_t{1024} * 1024}};
  }
  return {};
}

std::string_view UnitHint(ResourceKind kind) {
  switch (kind) {
    case ResourceKind::kGpu:
      return "a number of GPUs such as 8, 1.5 or 500m";
    case ResourceKind::kCpu:
      return "a number of cores such as 64, 0.5 or 500m";
    case ResourceKind::kGpuMemory:
    case ResourceKind::kMemory:
      return "a size such as 512Gi, 1.5Ti, 2048Mi or 2048 (MiB)";
  }
  return "a quantity";
}

// "1.5Gi" -> 1536 (for memory). Exact integer arithmetic; the result must be a whole
// number of ledger units.
StatusOr<int64_t> ParseQuantityText(std::string_view text, ResourceKind kind) {
  const std::string bad =
      "bad quantity '" + std::string(text) + "': expected " + std::string(UnitHint(kind));
  std::string_view t = Trim(text);
  if (!t.empty() && t[0] == '-') {
    return InvalidArgumentError("quantity '" + std::string(text) + "' must not be negative");
  }
  if (!t.empty() && t[0] == '+') {
    t.remove_prefix(1);
  }
  size_t pos = 0;
  int64_t mantissa = 0;
  int int_digits = 0;
  int frac_digits = 0;
  bool overflow = false;
  auto take_digits = [&](int& count) {
    while (pos < t.size() && t[pos] >= '0' && t[pos] <= '9') {
      overflow |= __builtin_mul_overflow(mantissa, int64_t{10}, &mantissa);
      overflow |= __builtin_add_overflow(mantissa, int64_t{t[pos] - '0'}, &mantissa);
      ++count;
      ++pos;
    }
  };
  take_digits(int_digits);
  if (pos < t.size() && t[pos] == '.') {
    ++pos;
    take_digits(frac_digits);
    if (frac_digits == 0) {
      return InvalidArgumentError(bad);
    }
  }
  if (int_digits + frac_digits == 0) {
    return InvalidArgumentError(bad);
  }
  std::string_view suffix = t.substr(pos);
  const std::vector<QuotaUnit> units = UnitsOf(kind);
  auto unit = std::find_if(units.begin(), units.end(),
                           [&](const QuotaUnit& u) { return u.suffix == suffix; });
  if (unit == units.end()) {
    return InvalidArgumentError(bad);
  }
  int64_t scaled = 0;
  overflow |= __builtin_mul_overflow(mantissa, unit->scale, &scaled);
  if (overflow || frac_digits > 18) {
    return InvalidArgumentError("quantity '" + std::string(text) + "' is out of range");
  }
  int64_t divisor = 1;
  for (int i = 0; i < frac_digits; ++i) {
    divisor *= 10;
  }
  if (scaled % divisor != 0) {
    return InvalidArgumentError("quantity '" + std::string(text) + "' is finer than the unit of " +
                                (kind == ResourceKind::kGpu   ? "1m (a thousandth of a GPU)"
                                 : kind == ResourceKind::kCpu ? "1m (a thousandth of a core)"
                                                              : "1 MiB"));
  }
  return scaled / divisor;
}

StatusOr<int64_t> ReadQuantity(const YAML::Node& node, ResourceKind kind, const std::string& path) {
  if (!node.IsScalar()) {
    return kYaml.Error(
        path, node,
        "expected " + std::string(UnitHint(kind)) + ", got " + YamlReader::Describe(node));
  }
  StatusOr<int64_t> value = ParseQuantityText(node.Scalar(), kind);
  if (!value.ok()) {
    return kYaml.Error(path, node, value.status().message());
  }
  return *value;
}

// quota: {gpu: 8, cpu: {nominal: 64, borrowingLimit: 16}}
Status ReadQuotas(const YAML::Node& map, const std::string& path, const GpuCatalog& catalog,
                  std::vector<QueueQuota>& out) {
  return kYaml.ForEachKey(
      map, path, {},
      [&](const std::string& key, const YAML::Node& value,
          const std::string& value_path) -> Status {
        StatusOr<ResourceName> resource = ParseResourceName(key, catalog);
        if (!resource.ok()) {
          return kYaml.Error(value_path, value, resource.status().message());
        }
        for (const QueueQuota& q : out) {
          if (q.resource == *resource) {
            return kYaml.Error(
                value_path, value,
                "quota on " + ResourceNameString(*resource, catalog) + " is set twice");
          }
        }
        QueueQuota quota;
        quota.resource = *resource;
        const ResourceKind kind = resource->kind;
        if (value.IsMap()) {
          TESSERA_RETURN_IF_ERROR(kYaml.ForEachKey(
              value, value_path, {"nominal", "borrowingLimit", "lendingLimit"},
              [&](const std::string& field, const YAML::Node& amount,
                  const std::string& amount_path) -> Status {
                TESSERA_ASSIGN_OR_RETURN(int64_t v, ReadQuantity(amount, kind, amount_path));
                if (field == "nominal") {
                  quota.quota.nominal = v;
                } else if (field == "borrowingLimit") {
                  quota.quota.borrowing_limit = v;
                } else {
                  quota.quota.lending_limit = v;
                }
                return Status::Ok();
              }));
        } else {
          TESSERA_ASSIGN_OR_RETURN(quota.quota.nominal, ReadQuantity(value, kind, value_path));
        }
        out.push_back(quota);
        return Status::Ok();
      });
}

// One entry of `cohorts` (cohort true) or `queues`.
StatusOr<QueueNodeSpec> ReadNode(const YAML::Node& entry, const std::string& path, bool cohort,
                                 const GpuCatalog& catalog) {
  QueueNodeSpec node;
  node.cohort = cohort;
  const std::vector<std::string_view> keys =
      cohort ? std::vector<std::string_view>{"name", "parent", "quota", "weight"}
             : std::vector<std::string_view>{"name",       "cohort",
                                             "tenant",     "weight",
                                             "quota",      "idle",
                                             "maxPending", "defaultCpuPerGpu",
                                             "defaultMemoryPerGpu"};
  TESSERA_RETURN_IF_ERROR(kYaml.ForEachKey(
      entry, path, keys,
      [&](const std::string& key, const YAML::Node& value,
          const std::string& value_path) -> Status {
        if (key == "name") {
          TESSERA_ASSIGN_OR_RETURN(node.name, kYaml.String(value, value_path));
        } else if (key == "parent" || key == "cohort") {
          TESSERA_ASSIGN_OR_RETURN(node.parent, kYaml.String(value, value_path));
        } else if (key == "tenant") {
          TESSERA_ASSIGN_OR_RETURN(node.tenant, kYaml.String(value, value_path));
        } else if (key == "idle") {
          // Checked here, read by the controller (queue_idle.h).
          return ReadIdlePolicy(value, value_path).status();
        } else if (key == "maxPending") {
          return ReadMaxPending(value, value_path).status();  // likewise (queue_limits.h)
        } else if (key == "defaultCpuPerGpu" || key == "defaultMemoryPerGpu") {
          // Likewise (queue_resource_defaults.h).
          return ReadPerGpuDefault(value, value_path, key == "defaultCpuPerGpu").status();
        } else if (key == "weight") {
          TESSERA_ASSIGN_OR_RETURN(node.weight, kYaml.Int(value, value_path));
          if (node.weight <= 0) {
            return kYaml.Error(value_path, value,
                               "weight must be > 0, got " + std::to_string(node.weight));
          }
        } else {
          return ReadQuotas(value, value_path, catalog, node.quotas);
        }
        return Status::Ok();
      }));
  if (node.name.empty()) {
    return kYaml.Error(path, entry, std::string(cohort ? "a cohort" : "a queue") + " needs a name");
  }
  return node;
}

StatusOr<PriorityClass> ReadPriorityClass(const YAML::Node& entry, const std::string& path) {
  PriorityClass pc;
  bool has_value = false;
  TESSERA_RETURN_IF_ERROR(kYaml.ForEachKey(
      entry, path, {"name", "value"},
      [&](const std::string& key, const YAML::Node& value,
          const std::string& value_path) -> Status {
        if (key == "name") {
          TESSERA_ASSIGN_OR_RETURN(pc.name, kYaml.String(value, value_path));
          return Status::Ok();
        }
        TESSERA_ASSIGN_OR_RETURN(int64_t v, kYaml.Int(value, value_path));
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
          return kYaml.Error(value_path, value,
                             "priority " + std::to_string(v) + " is out of range");
        }
        pc.value = static_cast<int32_t>(v);
        has_value = true;
        return Status::Ok();
      }));
  if (pc.name.empty()) {
    return kYaml.Error(path, entry, "a priority class needs a name");
  }
  if (!has_value) {
    return kYaml.Error(path, entry, "priority class '" + pc.name + "' needs a value");
  }
  return pc;
}

StatusOr<QueueTreeSpec> Parse(const YAML::Node& root, const GpuCatalog& catalog) {
  QueueTreeSpec spec;
  if (!root.IsDefined() || root.IsNull()) {
    return spec;
  }
  // Cohorts come before queues in the spec whatever the order in the file, so that
  // queues() and resources() follow the file within each kind.
  std::vector<QueueNodeSpec> cohorts;
  std::vector<QueueNodeSpec> queues;
  TESSERA_RETURN_IF_ERROR(kYaml.ForEachKey(
      root, "", {"priorityClasses", "cohorts", "queues"},
      [&](const std::string& key, const YAML::Node& value, const std::string& path) -> Status {
        if (key == "priorityClasses") {
          return kYaml.ForEachEntry(
              value, path, [&](const YAML::Node& entry, const std::string& p) {
                TESSERA_ASSIGN_OR_RETURN(PriorityClass pc, ReadPriorityClass(entry, p));
                spec.priority_classes.push_back(std::move(pc));
                return Status::Ok();
              });
        }
        const bool cohort = key == "cohorts";
        return kYaml.ForEachEntry(value, path, [&](const YAML::Node& entry, const std::string& p) {
          TESSERA_ASSIGN_OR_RETURN(QueueNodeSpec node, ReadNode(entry, p, cohort, catalog));
          (cohort ? cohorts : queues).push_back(std::move(node));
          return Status::Ok();
        });
      }));
  spec.nodes = std::move(cohorts);
  for (QueueNodeSpec& q : queues) {
    spec.nodes.push_back(std::move(q));
  }
  return spec;
}

}  // namespace

std::string QueueTreeYaml(const QueueTreeSpec& spec, const GpuCatalog& catalog) {
  auto quantity = [](ResourceKind kind, int64_t v) {
    const bool milli = kind == ResourceKind::kGpu || kind == ResourceKind::kCpu;
    return std::to_string(v) + (milli ? "m" : "");
  };
  YAML::Emitter out;
  out << YAML::BeginMap;
  if (!spec.priority_classes.empty()) {
    out << YAML::Key << "priorityClasses" << YAML::Value << YAML::BeginSeq;
    for (const PriorityClass& pc : spec.priority_classes) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << pc.name
          << YAML::Key << "value" << YAML::Value << pc.value << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  for (const bool cohorts : {true, false}) {
    out << YAML::Key << (cohorts ? "cohorts" : "queues") << YAML::Value << YAML::BeginSeq;
    for (const QueueNodeSpec& n : spec.nodes) {
      if (n.cohort != cohorts) {
        continue;
      }
      out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << n.name;
      if (!n.parent.empty()) {
        out << YAML::Key << (cohorts ? "parent" : "cohort") << YAML::Value << n.parent;
      }
      if (!cohorts && !n.tenant.empty()) {
        out << YAML::Key << "tenant" << YAML::Value << n.tenant;
      }
      out << YAML::Key << "weight" << YAML::Value << n.weight;
      if (!n.quotas.empty()) {
        out << YAML::Key << "quota" << YAML::Value << YAML::BeginMap;
        for (const QueueQuota& q : n.quotas) {
          const ResourceKind kind = q.resource.kind;
          out << YAML::Key << ResourceNameString(q.resource, catalog) << YAML::Value
              << YAML::Flow << YAML::BeginMap << YAML::Key << "nominal" << YAML::Value
              << quantity(kind, q.quota.nominal);
          if (q.quota.borrowing_limit) {
            out << YAML::Key << "borrowingLimit" << YAML::Value
                << quantity(kind, *q.quota.borrowing_limit);
          }
          if (q.quota.lending_limit) {
            out << YAML::Key << "lendingLimit" << YAML::Value
                << quantity(kind, *q.quota.lending_limit);
          }
          out << YAML::EndMap;
        }
        out << YAML::EndMap;
      }
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

StatusOr<int64_t> ParseResourceQuantity(const YAML::Node& node, ResourceKind kind) {
  try {
    return ReadQuantity(node, kind, "");
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("bad quantity: " + e.msg);
  }
}

StatusOr<QueueTreeSpec> ParseQueueTreeYaml(const YAML::Node& root, const GpuCatalog& catalog) {
  try {
    return Parse(root, catalog);
  } catch (const YAML::Exception& e) {
    std::string where;
    if (!e.mark.is_null()) {
      where = " (line " + std::to_string(e.mark.line + 1) + ", column " +
              std::to_string(e.mark.column + 1) + ")";
    }
    return InvalidArgumentError("queue config: " + e.msg + where);
  }
}

StatusOr<QueueTreeSpec> ParseQueueTreeText(std::string_view yaml, const GpuCatalog& catalog,
                                           const std::string& source) {
  // The kit's format: "source: [path: ]message (line L, column C)".
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(source + ": " + e.msg + YamlReader::At(e.mark));
  }
  StatusOr<QueueTreeSpec> spec = ParseQueueTreeYaml(root, catalog);
  if (!spec.ok()) {
    return Status(spec.status().code(), source + ": " + spec.status().message());
  }
  return spec;
}

StatusOr<QueueTreeSpec> LoadQueueTreeFile(const std::string& path, const GpuCatalog& catalog) {
  std::ifstream in(path);
  if (!in) {
    return NotFoundError("cannot read queue config '" + path + "'");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseQueueTreeText(text.str(), catalog, path);
}

Status ForEachQueueEntry(
    std::string_view yaml,
    const std::function<Status(const YAML::Node& entry, const std::string& path,
                               const std::string& name)>& fn) {
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    if (!root.IsMap() || !root["queues"] || !root["queues"].IsSequence()) {
      return Status::Ok();
    }
    size_t i = 0;
    for (const YAML::Node& q : root["queues"]) {
      const std::string path = "queues[" + std::to_string(i++) + "]";
      if (!q.IsMap() || !q["name"]) {
        continue;
      }
      TESSERA_RETURN_IF_ERROR(fn(q, path, q["name"].as<std::string>()));
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("queue config: " + e.msg);
  }
  return Status::Ok();
}

}  // namespace tessera
