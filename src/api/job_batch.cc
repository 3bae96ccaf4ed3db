#include "api/job_batch.h"

#include <yaml-cpp/yaml.h>

#include <exception>
#include <string>
#include <utility>

#include "api/job_keys.h"
#include "api/json_fields.h"
#include "api/yaml_reader.h"
#include "base/strings.h"

namespace tessera {
namespace {

constexpr int kMaxBatchNesting = kMaxJobNesting + 2;  // the document, then its list

// What a job holds beyond its fixed fields: the text a YAML alias could repeat.
size_t ExpandedBytes(const JobSubmission& job) {
  size_t n = job.spec.name.size() + job.spec.queue.size() + job.spec.user.size() +
             job.working_dir.size() + job.submit_dir.size() + job.checkpoint_dir.size();
  for (const std::string& arg : job.command) {
    n += arg.size();
  }
  for (const auto& [key, value] : job.env) {
    n += key.size() + value.size();
  }
  return n;
}

// Keeps the running totals of a batch against its bounds.
class BatchBudget {
 public:
  explicit BatchBudget(size_t max_jobs) : max_jobs_(max_jobs) {}

  Status CheckCount(size_t jobs) const {
    if (jobs == 0) {
      return InvalidArgumentError("jobs: a batch needs at least one job");
    }
    if (jobs > max_jobs_) {
      return OutOfRangeError("jobs: " + std::to_string(jobs) + " jobs in one batch, more than " +
                             std::to_string(max_jobs_) + "; split it");
    }
    return Status::Ok();
  }

  Status Add(const JobSubmission& job) {
    tasks_ += job.spec.tasks.size();
    bytes_ += ExpandedBytes(job);
    if (tasks_ > kMaxBatchTasks) {
      return OutOfRangeError("jobs: more than " + std::to_string(kMaxBatchTasks) +
                             " tasks (replicas) in one batch; split it");
    }
    if (bytes_ > kMaxBatchExpandedBytes) {
      return OutOfRangeError(
          "jobs: the commands, environments and paths of the batch come to "
          "more than " +
          std::to_string(kMaxBatchExpandedBytes) + " bytes; split it");
    }
    return Status::Ok();
  }

 private:
  const size_t max_jobs_;
  size_t tasks_ = 0;
  size_t bytes_ = 0;
};

// The batch's submit_dir (null: none), read as a job's own is, so that the same rules
// apply, and given to the jobs that set none of their own.
Status ApplySubmitDir(const Json& dir, const GpuCatalog& catalog,
                      std::vector<JobSubmission>& jobs) {
  if (dir.is_null()) {
    return Status::Ok();
  }
  TESSERA_ASSIGN_OR_RETURN(
      JobSubmission probe,
      JobSubmissionFromJsonAt(Json{{"command", "true"}, {"submit_dir", dir}}, catalog, ""));
  for (JobSubmission& job : jobs) {
    if (job.submit_dir.empty()) {
      job.submit_dir = probe.submit_dir;
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<JobSubmission>> ParseJson(std::string_view text, const GpuCatalog& catalog,
                                               size_t max_jobs) {
  TESSERA_ASSIGN_OR_RETURN(
      Json doc, ParseJsonText(text, "job batch", {kMaxBatchExpandedBytes, kMaxBatchNesting}));
  FieldReader r;
  TESSERA_RETURN_IF_ERROR(r.CheckObject(doc, "", job_keys::kBatchKeys));
  const Json* list = FindField(doc, job_keys::kJobs);
  if (list == nullptr) {
    return InvalidArgumentError("jobs: is required: a list of job specs");
  }
  if (!list->is_array()) {
    return InvalidArgumentError("jobs: expected a list of job specs, got " + DescribeJson(*list));
  }
  BatchBudget budget(max_jobs);
  TESSERA_RETURN_IF_ERROR(budget.CheckCount(list->size()));
  std::vector<JobSubmission> jobs;
  jobs.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(JobSubmission job,
                             JobSubmissionFromJsonAt((*list)[i], catalog, IndexPath("jobs", i)));
    TESSERA_RETURN_IF_ERROR(budget.Add(job));
    jobs.push_back(std::move(job));
  }
  const Json* dir = FindField(doc, job_keys::kSubmitDir);
  TESSERA_RETURN_IF_ERROR(ApplySubmitDir(dir != nullptr ? *dir : Json(), catalog, jobs));
  return jobs;
}

StatusOr<std::vector<JobSubmission>> ParseYaml(std::string_view text, const GpuCatalog& catalog,
                                               size_t max_jobs) {
  const std::string input(text);
  const YamlReader reader;
  const int documents = YamlReader::CountDocuments(input);
  if (documents != 1) {
    return InvalidArgumentError(documents == 0 ? "job batch: the document is empty"
                                               : "job batch: expected one YAML document, found "
                                                 "more (or text after the document)");
  }
  const YAML::Node root = YAML::Load(input);
  if (!root.IsMap()) {
    return reader.Error("", root, "expected a map with a list of jobs under 'jobs'");
  }
  YAML::Node list;
  Json submit_dir;
  TESSERA_RETURN_IF_ERROR(reader.ForEachKey(
      root, "", {job_keys::kBatchKeys.begin(), job_keys::kBatchKeys.end()},
      [&](const std::string& key, const YAML::Node& value, const std::string& path) -> Status {
        if (key == job_keys::kJobs) {
          list = value;
        } else if (!value.IsNull()) {
          TESSERA_ASSIGN_OR_RETURN(std::string dir, reader.String(value, path));
          submit_dir = dir;
        }
        return Status::Ok();
      }));
  if (!list) {
    return reader.Error("jobs", root, "is required: a list of job specs");
  }
  if (!list.IsSequence()) {
    return reader.Error("jobs", list,
                        "expected a list of job specs, got " + YamlReader::Describe(list));
  }
  BatchBudget budget(max_jobs);
  TESSERA_RETURN_IF_ERROR(budget.CheckCount(list.size()));
  std::vector<JobSubmission> jobs;
  jobs.reserve(list.size());
  EmbeddedJobOptions options;
  options.require_command = true;
  size_t i = 0;
  for (const YAML::Node& item : list) {
    options.path = IndexPath("jobs", i++);
    TESSERA_ASSIGN_OR_RETURN(JobSubmission job, ReadEmbeddedJob(item, catalog, options));
    TESSERA_RETURN_IF_ERROR(budget.Add(job));
    jobs.push_back(std::move(job));
  }
  TESSERA_RETURN_IF_ERROR(ApplySubmitDir(submit_dir, catalog, jobs));
  return jobs;
}

}  // namespace

StatusOr<std::vector<JobSubmission>> ParseJobBatch(std::string_view text, BatchFormat format,
                                                   const GpuCatalog& catalog, size_t max_jobs) {
  if (text.size() > kMaxBatchExpandedBytes) {
    return OutOfRangeError("job batch: text of " + std::to_string(text.size()) +
                           " bytes is over the limit of " + std::to_string(kMaxBatchExpandedBytes));
  }
  try {
    return format == BatchFormat::kJson ? ParseJson(text, catalog, max_jobs)
                                        : ParseYaml(text, catalog, max_jobs);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("job batch: " + ToValidUtf8(e.msg) + YamlReader::At(e.mark));
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("job batch: ") + ToValidUtf8(e.what()));
  }
}

bool LooksLikeJobBatch(std::string_view text) {
  const std::string_view t = Trim(text);
  if (!t.empty() && t[0] == '{') {
    const Json doc = Json::parse(t, nullptr, false);
    return doc.is_object() && doc.contains("jobs");
  }
  try {
    const std::string input(t);
    if (YamlReader::CountDocuments(input) != 1) {
      return false;
    }
    const YAML::Node root = YAML::Load(input);
    return root.IsMap() && root["jobs"];
  } catch (const YAML::Exception&) {
    return false;
  }
}

}  // namespace tessera
