#include "api/kueue_import.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/queue_config.h"
#include "api/yaml_reader.h"
#include "base/strings.h"

namespace tessera {
namespace {

constexpr int kMaxDocuments = 100'000;

struct Flavor {
  std::string name;
  GpuModelId model;  // invalid: any GPU model
};

// One Kueue object: its document, kind and name.
struct Object {
  YAML::Node root;
  std::string kind;
  std::string name;
  std::string namespace_name;
};

bool IStartsWith(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) {
    return false;
  }
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(text[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

// "NVIDIA-H100-80GB-HBM3" (GPU feature discovery), "nvidia-tesla-a100" (GKE), with
// "-SHARED" for time-sliced cards.
std::optional<GpuModelId> ModelOfProduct(std::string_view product, const GpuCatalog& catalog) {
  std::string_view p = Trim(product);
  constexpr std::string_view kShared = "-SHARED";
  if (p.size() > kShared.size() && IStartsWith(p.substr(p.size() - kShared.size()), kShared)) {
    p.remove_suffix(kShared.size());
  }
  std::vector<std::string_view> candidates = {p};
  for (std::string_view prefix : {"nvidia-tesla-", "nvidia-", "tesla-"}) {
    if (IStartsWith(p, prefix)) {
      candidates.push_back(p.substr(prefix.size()));
    }
  }
  for (std::string_view c : candidates) {
    StatusOr<GpuModelId> id = catalog.Find(c);
    if (id.ok()) {
      return *id;
    }
  }
  return std::nullopt;
}

// Splits multi-document YAML at "---" lines (yaml-cpp's LoadAll may not return on
// malformed input; see yaml_reader.h). Each document keeps its line numbers: it is
// padded with the newlines that came before it.
std::vector<std::string> SplitDocuments(std::string_view text) {
  std::vector<std::string> docs;
  std::string current;
  size_t line = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    std::string_view l = text.substr(start, end - start);
    const bool separator =
        StartsWith(l, "---") && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    if (separator) {
      docs.push_back(std::move(current));
      current.assign(line + 1, '\n');
      const std::string_view rest = Trim(l.substr(3));
      if (!rest.empty() && rest[0] != '#') {
        current.pop_back();
        current += std::string(3, ' ');
        current += std::string(rest) + "\n";
      }
    } else {
      current += std::string(l) + "\n";
    }
    ++line;
    start = end + 1;
  }
  docs.push_back(std::move(current));
  return docs;
}

class Importer {
 public:
  Importer(const GpuCatalog& catalog, const KueueImportOptions& options)
      : catalog_(catalog), options_(options) {}

  StatusOr<KueueImport> Run(std::string_view text, const std::string& source) {
    TESSERA_RETURN_IF_ERROR(LoadObjects(text, source));
    // Flavors and priority classes first: queues refer to flavors wherever they are.
    for (const Object& o : objects_) {
      if (o.kind == "ResourceFlavor") {
        TESSERA_RETURN_IF_ERROR(ReadFlavor(o));
      } else if (o.kind == "WorkloadPriorityClass") {
        TESSERA_RETURN_IF_ERROR(ReadPriorityClass(o));
      }
    }
    for (const Object& o : objects_) {
      if (o.kind == "Cohort" || o.kind == "ClusterQueue") {
        TESSERA_RETURN_IF_ERROR(ReadQueueNode(o, o.kind == "Cohort"));
      }
    }
    for (const Object& o : objects_) {
      if (o.kind == "LocalQueue") {
        TESSERA_RETURN_IF_ERROR(ReadLocalQueue(o));
      }
    }
    return Finish();
  }

 private:
  // A feature without an equivalent: an error, or a warning when lenient.
  Status Problem(const YamlReader& r, const std::string& path, const YAML::Node& node,
                 const std::string& message) {
    Status s = r.Error(path, node, message);
    if (!options_.lenient) {
      return s;
    }
    result_.warnings.push_back(s.message());
    return Status::Ok();
  }

  Status LoadObjects(std::string_view text, const std::string& source) {
    const YamlReader top(source);
    std::vector<std::string> docs = SplitDocuments(text);
    if (docs.size() > kMaxDocuments) {
      return InvalidArgumentError(source + ": more than " + std::to_string(kMaxDocuments) +
                                  " documents");
    }
    for (const std::string& doc : docs) {
      YAML::Node root;
      try {
        if (YamlReader::CountDocuments(doc) > 1) {
          return InvalidArgumentError(source + ": a document holds another after it");
        }
        root = YAML::Load(doc);
      } catch (const YAML::Exception& e) {
        return InvalidArgumentError(source + ": " + e.msg + YamlReader::At(e.mark));
      }
      if (!root.IsDefined() || root.IsNull()) {
        continue;
      }
      if (!root.IsMap()) {
        return top.Error("", root,
                         "expected a Kubernetes object (a map), got " + YamlReader::Describe(root));
      }
      Object o;
      o.root = root;
      const YAML::Node api = root["apiVersion"];
      const YAML::Node kind = root["kind"];
      if (!kind.IsDefined() || !kind.IsScalar()) {
        return top.Error("kind", root, "every object needs a kind");
      }
      o.kind = kind.Scalar();
      const YAML::Node metadata = root["metadata"];
      // A missing key is an invalid node, which throws when asked anything but IsDefined.
      if (metadata.IsDefined() && metadata.IsMap()) {
        const YAML::Node name = metadata["name"];
        const YAML::Node ns = metadata["namespace"];
        o.name = name.IsDefined() && name.IsScalar() ? name.Scalar() : "";
        o.namespace_name = ns.IsDefined() && ns.IsScalar() ? ns.Scalar() : "";
      }
      const YamlReader r(o.kind + (o.name.empty() ? "" : " " + o.name));
      if (!api.IsDefined() || !api.IsScalar() || !StartsWith(api.Scalar(), "kueue.x-k8s.io/")) {
        TESSERA_RETURN_IF_ERROR(
            Problem(r, "apiVersion", api.IsDefined() ? api : root,
                    "not a Kueue object (apiVersion kueue.x-k8s.io/...): it is skipped"));
        continue;
      }
      static const std::vector<std::string> kKinds = {"ClusterQueue", "Cohort", "ResourceFlavor",
                                                      "LocalQueue", "WorkloadPriorityClass"};
      if (std::find(kKinds.begin(), kKinds.end(), o.kind) == kKinds.end()) {
        TESSERA_RETURN_IF_ERROR(Problem(r, "kind", kind,
                                        "no equivalent in Tessera (imported kinds: " +
                                            Join(kKinds, ", ") + "): it is skipped"));
        continue;
      }
      if (o.name.empty()) {
        return r.Error("metadata.name", root, "every object needs a name");
      }
      objects_.push_back(std::move(o));
    }
    return Status::Ok();
  }

  // The object's spec (a map, possibly empty); unknown top-level keys are problems.
  StatusOr<YAML::Node> Spec(const Object& o, const YamlReader& r,
                            std::vector<std::string_view> top_level = {"spec"}) {
    for (std::string_view k : {"apiVersion", "kind", "metadata", "status"}) {
      top_level.push_back(k);
    }
    TESSERA_RETURN_IF_ERROR(
        r.ForEachKey(o.root, "", {},
                     [&](const std::string& key, const YAML::Node& value, const std::string& path) {
                       if (std::find(top_level.begin(), top_level.end(), key) == top_level.end()) {
                         return Problem(r, path, value, "unknown field '" + key + "'");
                       }
                       return Status::Ok();
                     }));
    YAML::Node spec = o.root["spec"];
    if (!spec.IsDefined() || spec.IsNull()) {
      return YAML::Node(YAML::NodeType::Map);
    }
    if (!spec.IsMap()) {
      return r.Error("spec", spec, "expected a map, got " + YamlReader::Describe(spec));
    }
    return spec;
  }

  Status ReadFlavor(const Object& o) {
    const YamlReader r("ResourceFlavor " + o.name);
    TESSERA_ASSIGN_OR_RETURN(YAML::Node spec, Spec(o, r));
    Flavor f;
    f.name = o.name;
    TESSERA_RETURN_IF_ERROR(r.ForEachKey(
        spec, "spec", {},
        [&](const std::string& key, const YAML::Node& value, const std::string& path) {
          if (key != "nodeLabels") {
            return Problem(r, path, value,
                           "no equivalent in Tessera (a flavor is a GPU model; placement "
                           "follows the job's request)");
          }
          return r.ForEachKey(
              value, path, {},
              [&](const std::string& label, const YAML::Node& v,
                  const std::string& label_path) -> Status {
                if (label != "nvidia.com/gpu.product" &&
                    label != "cloud.google.com/gke-accelerator") {
                  return Problem(r, label_path, v,
                                 "node label '" + label +
                                     "' has no equivalent in Tessera (flavors map to GPU models "
                                     "by nvidia.com/gpu.product)");
                }
                TESSERA_ASSIGN_OR_RETURN(std::string product, r.String(v, label_path));
                std::optional<GpuModelId> model = ModelOfProduct(product, catalog_);
                if (!model) {
                  return r.Error(label_path, v,
                                 "GPU product '" + product + "' is not a known GPU model");
                }
                if (f.model.valid() && f.model != *model) {
                  return r.Error(label_path, v, "names a second GPU model");
                }
                f.model = *model;
                return Status::Ok();
              });
        }));
    if (flavors_.count(o.name) > 0) {
      return r.Error("metadata.name", o.root, "ResourceFlavor '" + o.name + "' is defined twice");
    }
    flavors_[o.name] = f;
    return Status::Ok();
  }

  Status ReadPriorityClass(const Object& o) {
    const YamlReader r("WorkloadPriorityClass " + o.name);
    TESSERA_ASSIGN_OR_RETURN(YAML::Node spec, Spec(o, r, {"value", "description"}));
    (void)spec;
    const YAML::Node value = o.root["value"];
    if (!value.IsDefined()) {
      return r.Error("value", o.root, "a priority class needs a value");
    }
    TESSERA_ASSIGN_OR_RETURN(int64_t v, r.Int(value, "value"));
    if (v < INT32_MIN || v > INT32_MAX) {
      return r.Error("value", value, "priority " + std::to_string(v) + " is out of range");
    }
    result_.spec.priority_classes.push_back(PriorityClass{o.name, static_cast<int32_t>(v)});
    return Status::Ok();
  }

  // A quantity of `kind` in its ledger unit.
  StatusOr<int64_t> Quantity(const YamlReader& r, const YAML::Node& node, ResourceKind kind,
                             const std::string& path) {
    if (kind == ResourceKind::kMemory) {
      if (!node.IsScalar()) {
        return r.Error(path, node, "expected a memory quantity such as 512Gi");
      }
      bool exact = true;
      StatusOr<int64_t> mib = KubernetesBytesToMiB(node.Scalar(), &exact);
      if (!mib.ok()) {
        return r.Error(path, node, mib.status().message());
      }
      if (!exact) {
        result_.warnings.push_back(
            r.Error(path, node,
                    "'" + node.Scalar() + "' rounded down to " + std::to_string(*mib) + "Mi")
                .message());
      }
      return *mib;
    }
    StatusOr<int64_t> v = ParseResourceQuantity(node, kind);
    if (!v.ok()) {
      return r.Error(path, node, v.status().message());
    }
    return *v;
  }

  // resources: [{name, nominalQuota, borrowingLimit, lendingLimit}] of one flavor.
  Status ReadFlavorResources(const YamlReader& r, const Flavor& flavor, const YAML::Node& list,
                             const std::string& path, std::vector<QueueQuota>& out,
                             std::vector<std::string>& origins) {
    return r.ForEachEntry(
        list, path, [&](const YAML::Node& res, const std::string& rpath) -> Status {
          std::string name;
          std::optional<YAML::Node> amounts[3];  // nominalQuota, borrowingLimit, lendingLimit
          TESSERA_RETURN_IF_ERROR(r.ForEachKey(
              res, rpath, {"name", "nominalQuota", "borrowingLimit", "lendingLimit"},
              [&](const std::string& key, const YAML::Node& value,
                  const std::string& kpath) -> Status {
                if (key == "name") {
                  TESSERA_ASSIGN_OR_RETURN(name, r.String(value, kpath));
                } else {
                  amounts[key == "nominalQuota" ? 0 : key == "borrowingLimit" ? 1 : 2] = value;
                }
                return Status::Ok();
              }));
          ResourceName resource;
          if (name == "nvidia.com/gpu") {
            resource = ResourceName{ResourceKind::kGpu, flavor.model};
          } else if (name == "cpu") {
            resource = ResourceName{ResourceKind::kCpu, GpuModelId()};
          } else if (name == "memory") {
            resource = ResourceName{ResourceKind::kMemory, GpuModelId()};
          } else {
            return Problem(r, rpath + ".name", res["name"],
                           "resource '" + name +
                               "' has no equivalent in Tessera (quotas on nvidia.com/gpu, cpu and "
                               "memory; MIG slices count against the GPU quota)");
          }
          if (!amounts[0]) {
            return r.Error(rpath, res, "resource '" + name + "' needs a nominalQuota");
          }
          QueueQuota q;
          q.resource = resource;
          TESSERA_ASSIGN_OR_RETURN(
              q.quota.nominal, Quantity(r, *amounts[0], resource.kind, rpath + ".nominalQuota"));
          if (amounts[1]) {
            TESSERA_ASSIGN_OR_RETURN(
                q.quota.borrowing_limit,
                Quantity(r, *amounts[1], resource.kind, rpath + ".borrowingLimit"));
          }
          if (amounts[2]) {
            TESSERA_ASSIGN_OR_RETURN(q.quota.lending_limit, Quantity(r, *amounts[2], resource.kind,
                                                                     rpath + ".lendingLimit"));
          }
          for (size_t i = 0; i < out.size(); ++i) {
            if (out[i].resource != resource) {
              continue;
            }
            TESSERA_RETURN_IF_ERROR(Problem(
                r, rpath + ".name", res["name"],
                "flavors '" + origins[i] + "' and '" + flavor.name + "' both give " +
                    ResourceNameString(resource, catalog_) +
                    ", which is one quota in Tessera (cpu and memory are not per flavor; give GPU "
                    "flavors a nvidia.com/gpu.product label); the two are added up"));
            Quota& merged = out[i].quota;
            merged.nominal += q.quota.nominal;
            auto add = [](std::optional<int64_t>& a, const std::optional<int64_t>& b) {
              a = a && b ? std::optional<int64_t>(*a + *b) : std::nullopt;
            };
            add(merged.borrowing_limit, q.quota.borrowing_limit);
            add(merged.lending_limit, q.quota.lending_limit);
            return Status::Ok();
          }
          out.push_back(q);
          origins.push_back(flavor.name);
          return Status::Ok();
        });
  }

  Status ReadResourceGroups(const YamlReader& r, const YAML::Node& groups, const std::string& path,
                            std::vector<QueueQuota>& out) {
    std::vector<std::string> origins;
    return r.ForEachEntry(groups, path, [&](const YAML::Node& group, const std::string& gpath) {
      return r.ForEachKey(
          group, gpath, {"coveredResources", "flavors"},
          [&](const std::string& key, const YAML::Node& value, const std::string& kpath) -> Status {
            if (key == "coveredResources") {
              return r.Strings(value, kpath).status();  // each flavor lists its resources
            }
            return r.ForEachEntry(
                value, kpath, [&](const YAML::Node& f, const std::string& fpath) -> Status {
                  std::string flavor_name;
                  YAML::Node resources;
                  TESSERA_RETURN_IF_ERROR(
                      r.ForEachKey(f, fpath, {"name", "resources"},
                                   [&](const std::string& k, const YAML::Node& v,
                                       const std::string& p) -> Status {
                                     if (k == "name") {
                                       TESSERA_ASSIGN_OR_RETURN(flavor_name, r.String(v, p));
                                     } else {
                                       resources = v;
                                     }
                                     return Status::Ok();
                                   }));
                  auto it = flavors_.find(flavor_name);
                  if (it == flavors_.end()) {
                    return r.Error(
                        fpath + ".name", f["name"].IsDefined() ? f["name"] : f,
                        "ResourceFlavor '" + flavor_name + "' is not defined in the input");
                  }
                  if (!resources.IsDefined()) {
                    return Status::Ok();
                  }
                  return ReadFlavorResources(r, it->second, resources, fpath + ".resources", out,
                                             origins);
                });
          });
    });
  }

  // spec.preemption: accepted where it says what Tessera's policy does.
  Status ReadPreemption(const YamlReader& r, const YAML::Node& p, const std::string& path) {
    const std::string policy_note =
        " has no per-queue equivalent: preemption is the cluster's --policy in Tessera "
        "(reclaim of lent quota from borrowing queues, priority preemption within a queue)";
    return r.ForEachKey(
        p, path, {},
        [&](const std::string& key, const YAML::Node& value, const std::string& kpath) -> Status {
          if (key == "borrowWithinCohort") {
            return r.ForEachKey(
                value, kpath, {},
                [&](const std::string& k, const YAML::Node& v, const std::string& vpath) -> Status {
                  if (k == "policy" && v.IsScalar() && v.Scalar() == "Never") {
                    return Status::Ok();
                  }
                  return Problem(r, vpath, v,
                                 "Tessera never preempts in order to borrow; only policy: Never "
                                 "has an equivalent");
                });
          }
          const std::string expected = key == "reclaimWithinCohort"  ? "Any"
                                       : key == "withinClusterQueue" ? "LowerPriority"
                                                                     : "";
          if (expected.empty()) {
            return Problem(r, kpath, value, "unknown field '" + key + "'");
          }
          if (value.IsScalar() && value.Scalar() == expected) {
            return Status::Ok();
          }
          return Problem(r, kpath, value,
                         "'" + (value.IsScalar() ? value.Scalar() : std::string("?")) + "'" +
                             policy_note + "; only " + expected + " matches it");
        });
  }

  StatusOr<int64_t> Weight(const YamlReader& r, const YAML::Node& fair, const std::string& path) {
    int64_t weight = 1;
    const Status read = r.ForEachKey(
        fair, path, {},
        [&](const std::string& key, const YAML::Node& value, const std::string& kpath) -> Status {
          if (key != "weight") {
            return Problem(r, kpath, value, "unknown field '" + key + "'");
          }
          StatusOr<int64_t> milli = ParseResourceQuantity(value, ResourceKind::kCpu);
          if (!milli.ok() || *milli % 1000 != 0 || *milli == 0) {
            TESSERA_RETURN_IF_ERROR(Problem(
                r, kpath, value,
                "weight '" + (value.IsScalar() ? value.Scalar() : std::string("?")) +
                    "' has no equivalent: Tessera's fair-share weights are whole numbers > 0"));
            weight = milli.ok() ? std::max<int64_t>(1, (*milli + 500) / 1000) : 1;
            return Status::Ok();
          }
          weight = *milli / 1000;
          return Status::Ok();
        });
    if (!read.ok()) {
      return read;
    }
    return weight;
  }

  Status ReadQueueNode(const Object& o, bool cohort) {
    const YamlReader r(o.kind + " " + o.name);
    TESSERA_ASSIGN_OR_RETURN(YAML::Node spec, Spec(o, r));
    QueueNodeSpec node;
    node.name = o.name;
    node.cohort = cohort;
    TESSERA_RETURN_IF_ERROR(r.ForEachKey(
        spec, "spec", {},
        [&](const std::string& key, const YAML::Node& value, const std::string& path) -> Status {
          const bool parent_key = cohort ? (key == "parent" || key == "parentName")
                                         : (key == "cohort" || key == "cohortName");
          if (parent_key) {
            TESSERA_ASSIGN_OR_RETURN(node.parent, r.String(value, path));
            return Status::Ok();
          }
          if (key == "resourceGroups") {
            return ReadResourceGroups(r, value, path, node.quotas);
          }
          if (key == "fairSharing") {
            TESSERA_ASSIGN_OR_RETURN(node.weight, Weight(r, value, path));
            return Status::Ok();
          }
          if (cohort) {
            return Problem(r, path, value, "unknown field '" + key + "'");
          }
          if (key == "preemption") {
            return ReadPreemption(r, value, path);
          }
          if (key == "queueingStrategy") {
            if (value.IsScalar() && value.Scalar() == "BestEffortFIFO") {
              return Status::Ok();
            }
            return Problem(r, path, value,
                           "has no per-queue equivalent (Tessera's queues are best-effort; "
                           "strict FIFO is the cluster's --policy fifo-strict)");
          }
          if (key == "namespaceSelector") {
            if (value.IsNull() || (value.IsMap() && value.size() == 0)) {
              return Status::Ok();
            }
            return Problem(r, path, value,
                           "has no equivalent: a Tessera queue bills one tenant (the namespace "
                           "of its LocalQueue)");
          }
          if (key == "stopPolicy") {
            if (value.IsScalar() && value.Scalar() == "None") {
              return Status::Ok();
            }
            return Problem(r, path, value, "has no equivalent in Tessera's queue configuration");
          }
          if (key == "admissionChecks" || key == "admissionChecksStrategy") {
            if (value.IsNull() || (value.IsSequence() && value.size() == 0)) {
              return Status::Ok();
            }
            return Problem(r, path, value, "admission checks have no equivalent in Tessera");
          }
          if (key == "flavorFungibility") {
            return Problem(r, path, value,
                           "has no equivalent: Tessera places a job on any GPU model it allows "
                           "(gpu_model) by its scorers");
          }
          return Problem(r, path, value, "unknown field '" + key + "'");
        }));
    if (cohort) {
      if (std::any_of(cohorts_.begin(), cohorts_.end(),
                      [&](const QueueNodeSpec& c) { return c.name == o.name; })) {
        return r.Error("metadata.name", o.root, "Cohort '" + o.name + "' is defined twice");
      }
      cohorts_.push_back(std::move(node));
    } else {
      queues_.push_back(std::move(node));
    }
    return Status::Ok();
  }

  Status ReadLocalQueue(const Object& o) {
    const YamlReader r("LocalQueue " + (o.namespace_name.empty() ? "" : o.namespace_name + "/") +
                       o.name);
    TESSERA_ASSIGN_OR_RETURN(YAML::Node spec, Spec(o, r));
    std::string cluster_queue;
    TESSERA_RETURN_IF_ERROR(r.ForEachKey(
        spec, "spec", {},
        [&](const std::string& key, const YAML::Node& value, const std::string& path) -> Status {
          if (key == "clusterQueue") {
            TESSERA_ASSIGN_OR_RETURN(cluster_queue, r.String(value, path));
            return Status::Ok();
          }
          if (key == "stopPolicy" && value.IsScalar() && value.Scalar() == "None") {
            return Status::Ok();
          }
          return Problem(r, path, value, "has no equivalent in Tessera");
        }));
    auto q = std::find_if(queues_.begin(), queues_.end(),
                          [&](const QueueNodeSpec& n) { return n.name == cluster_queue; });
    if (q == queues_.end()) {
      return Problem(r, "spec.clusterQueue",
                     spec["clusterQueue"].IsDefined() ? spec["clusterQueue"] : o.root,
                     "ClusterQueue '" + cluster_queue + "' is not in the input");
    }
    // Kubernetes' own default namespace.
    const std::string tenant = o.namespace_name.empty() ? "default" : o.namespace_name;
    if (!q->tenant.empty() && q->tenant != tenant) {
      return Problem(r, "metadata.namespace", o.root,
                     "ClusterQueue '" + cluster_queue + "' is already used from namespace '" +
                         q->tenant +
                         "': a Tessera queue bills one tenant (the first namespace is kept)");
    }
    q->tenant = tenant;
    return Status::Ok();
  }

  StatusOr<KueueImport> Finish() {
    // Cohorts named but not declared exist bare, as in Kueue.
    auto declare = [&](const std::string& name) {
      if (name.empty() || std::any_of(cohorts_.begin(), cohorts_.end(),
                                      [&](const QueueNodeSpec& c) { return c.name == name; })) {
        return;
      }
      QueueNodeSpec c;
      c.name = name;
      c.cohort = true;
      cohorts_.push_back(std::move(c));
    };
    for (size_t i = 0; i < cohorts_.size(); ++i) {
      declare(std::string(cohorts_[i].parent));
    }
    for (const QueueNodeSpec& q : queues_) {
      declare(q.parent);
    }
    for (const QueueNodeSpec& q : queues_) {
      if (std::any_of(cohorts_.begin(), cohorts_.end(),
                      [&](const QueueNodeSpec& c) { return c.name == q.name; })) {
        return InvalidArgumentError("ClusterQueue " + q.name + ": a cohort has the same name; " +
                                    "Tessera names queues and cohorts in one namespace");
      }
    }
    result_.spec.nodes = std::move(cohorts_);
    for (QueueNodeSpec& q : queues_) {
      result_.spec.nodes.push_back(std::move(q));
    }
    StatusOr<QueueTree> tree = QueueTree::Create(result_.spec, catalog_);
    if (!tree.ok()) {
      return InvalidArgumentError("the imported queue tree is not valid: " +
                                  tree.status().message());
    }
    return std::move(result_);
  }

  const GpuCatalog& catalog_;
  KueueImportOptions options_;
  std::vector<Object> objects_;
  std::map<std::string, Flavor> flavors_;
  std::vector<QueueNodeSpec> cohorts_;
  std::vector<QueueNodeSpec> queues_;
  KueueImport result_;
};

}  // namespace

// Bytes of the largest quantity times its decimal divisor exceed 64 bits.
__extension__ using Int128 = __int128;

StatusOr<int64_t> KubernetesBytesToMiB(std::string_view text, bool* exact) {
  const std::string bad = "bad memory quantity '" + std::string(text) +
                          "': expected a Kubernetes quantity such as 512Gi, 100G or 1073741824";
  std::string_view t = Trim(text);
  size_t pos = 0;
  Int128 mantissa = 0;
  int digits = 0;
  int frac = 0;
  while (pos < t.size() && std::isdigit(static_cast<unsigned char>(t[pos]))) {
    mantissa = mantissa * 10 + (t[pos++] - '0');
    if (++digits > 20) {
      return InvalidArgumentError("memory quantity '" + std::string(text) + "' is out of range");
    }
  }
  if (pos < t.size() && t[pos] == '.') {
    ++pos;
    while (pos < t.size() && std::isdigit(static_cast<unsigned char>(t[pos]))) {
      mantissa = mantissa * 10 + (t[pos++] - '0');
      if (++frac + digits > 20) {
        return InvalidArgumentError("memory quantity '" + std::string(text) + "' is out of range");
      }
    }
    if (frac == 0) {
      return InvalidArgumentError(bad);
    }
  }
  if (digits + frac == 0) {
    return InvalidArgumentError(bad);
  }
  static const std::map<std::string_view, Int128> kScale = {{"", 1},
                                                            {"k", 1000},
                                                            {"M", 1000'000},
                                                            {"G", 1000'000'000},
                                                            {"T", Int128{1000'000'000} * 1000},
                                                            {"P", Int128{1000'000'000} * 1000'000},
                                                            {"Ki", 1024},
                                                            {"Mi", 1024 * 1024},
                                                            {"Gi", Int128{1} << 30},
                                                            {"Ti", Int128{1} << 40},
                                                            {"Pi", Int128{1} << 50}};
  auto scale = kScale.find(t.substr(pos));
  if (scale == kScale.end()) {
    return InvalidArgumentError(bad);
  }
  Int128 divisor = 1;
  for (int i = 0; i < frac; ++i) {
    divisor *= 10;
  }
  const Int128 bytes_times_divisor = mantissa * scale->second;
  const Int128 mib_divisor = divisor * (Int128{1} << 20);
  const Int128 mib = bytes_times_divisor / mib_divisor;
  if (mib > INT64_MAX) {
    return InvalidArgumentError("memory quantity '" + std::string(text) + "' is out of range");
  }
  if (exact != nullptr) {
    *exact = bytes_times_divisor % mib_divisor == 0;
  }
  return static_cast<int64_t>(mib);
}

StatusOr<KueueImport> ImportKueueYaml(std::string_view yaml, const GpuCatalog& catalog,
                                      const KueueImportOptions& options,
                                      const std::string& source) {
  Importer importer(catalog, options);
  try {
    return importer.Run(yaml, source);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(source + ": " + e.msg + YamlReader::At(e.mark));
  }
}

}  // namespace tessera
