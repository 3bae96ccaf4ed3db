#include "cli/cluster_commands.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "api/job_batch.h"
#include "api/job_draft.h"
#include "api/job_keys.h"
#include "api/restart_policy.h"
#include "api/json_fields.h"
#include "api/job_relations.h"
#include "api/units.h"
#include "base/strings.h"
#include "base/time_format.h"
#include "cli/cluster_views.h"
#include "cli/job_actions.h"
#include "cli/eta_views.h"
#include "cli/job_file_fields.h"
#include "cli/json_read.h"
#include "cli/table.h"

namespace tessera {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------
// Reading the server's JSON without exceptions: a missing key or a value of another
// type reads as "absent".

using json_read::Array;
using json_read::AsInt;
using json_read::Field;
using json_read::Int;
using json_read::OptInt;
using json_read::Str;
using json_read::Time;

std::string Pretty(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace); }

// The server's JSON, indented; the raw body when it is not JSON.
void PrintJsonBody(const std::string& body, std::ostream& out) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    out << body;
    if (!body.empty() && body.back() != '\n') {
      out << "\n";
    }
    return;
  }
  out << Pretty(parsed) << "\n";
}

// ---------------------------------------------------------------------------------
// Shared helpers.

Status CheckOutput(const std::string& output, std::initializer_list<std::string_view> allowed) {
  if (output.empty()) {
    return Status::Ok();
  }
  std::string names;
  for (std::string_view a : allowed) {
    if (output == a) {
      return Status::Ok();
    }
    names += (names.empty() ? "" : ", ") + std::string(a);
  }
  return InvalidArgumentError("-o must be one of: " + names + " (got '" + output + "')");
}

// A job as users name it: its id, or ARRAY_INDEX for an element of an array.
StatusOr<std::string> ParseJobId(const std::string& text) {
  if (!ParseJobRef(text).ok()) {
    return InvalidArgumentError("expected a job id (a positive integer, or ARRAY_INDEX for an "
                                "array's element), got '" + text + "'");
  }
  return text;
}

StatusOr<std::string> ReadInput(const std::string& file) {
  std::ostringstream text;
  if (file == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return InvalidArgumentError("cannot read '" + file + "'");
  }
  text << in.rdbuf();
  return text.str();
}

// ---------------------------------------------------------------------------------
// A command's frame: checks, a client, the error report.

StatusOr<std::unique_ptr<ApiClient>> Connect(const ClientConfig& config) {
  return ApiClient::Create(config);
}

#define TESSERA_CLI_ASSIGN_OR_REPORT(lhs, expr, err)                                             \
  TESSERA_CLI_ASSIGN_OR_REPORT_IMPL(TESSERA_STATUS_CONCAT(tessera_cli_or_, __LINE__), lhs, expr, \
                                    err)
// NOLINTBEGIN(bugprone-macro-parentheses): `lhs` is a declaration.
#define TESSERA_CLI_ASSIGN_OR_REPORT_IMPL(tmp, lhs, expr, err) \
  auto tmp = (expr);                                           \
  if (!tmp.ok()) {                                             \
    return ReportError(tmp.status(), err);                     \
  }                                                            \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

#define TESSERA_CLI_RETURN_IF_ERROR(expr, err) \
  do {                                         \
    ::tessera::Status tessera_cli_s_ = (expr); \
    if (!tessera_cli_s_.ok()) {                \
      return ReportError(tessera_cli_s_, err); \
    }                                          \
  } while (false)

void SleepMillis(int64_t millis) { std::this_thread::sleep_for(std::chrono::milliseconds(millis)); }

Micros Now(const Clock& clock) { return clock.NowMicros(); }

}  // namespace

// ---------------------------------------------------------------------------------
// submit

StatusOr<JobDraft> JobDraftFromFlags(const SubmitOptions& o) {
  if (o.command.empty() && o.image.empty()) {
    return InvalidArgumentError(
        "a job needs a command: tessera submit [flags] -- COMMAND ARGS... (or -f job.yaml, or "
        "--image IMAGE to run the image's own)");
  }
  JobDraft d;
  TESSERA_ASSIGN_OR_RETURN(
      d.container, ContainerFlags("--image", o.image, o.container_mounts, o.container_workdir));
  d.name = o.name;
  d.queue = o.queue;
  if (!o.priority.empty()) {
    TESSERA_ASSIGN_OR_RETURN(d.priority, IntFlag("--priority", o.priority, INT32_MIN));
  }
  d.command = o.command;
  d.env.emplace();
  for (const std::string& kv : o.env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError("--env expects KEY=VALUE, got '" + kv + "'");
    }
    (*d.env)[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!o.replicas.empty()) {
    TESSERA_ASSIGN_OR_RETURN(d.replicas, IntFlag("--replicas", o.replicas, 1));
  }
  JobDraft::Resources& r = d.resources;
  if (!o.gpus.empty()) {
    TESSERA_ASSIGN_OR_RETURN(r.gpus, IntFlag("--gpus", o.gpus, 0));
  }
  if (!o.gpu_model.empty()) {
    r.gpu_model = {o.gpu_model};
  }
  if (!o.gpu_fraction.empty()) {
    TESSERA_ASSIGN_OR_RETURN(r.gpu_fraction, GpuFractionFlag("--gpu-fraction", o.gpu_fraction));
  }
  if (!o.gpu_memory.empty()) {
    TESSERA_ASSIGN_OR_RETURN(r.gpu_memory, MemoryFlag("--gpu-memory", o.gpu_memory));
  }
  r.mig = o.mig;
  if (!o.cpu.empty()) {
    TESSERA_ASSIGN_OR_RETURN(r.cpu, CpuFlag("--cpu", o.cpu));
  }
  if (!o.memory.empty()) {
    TESSERA_ASSIGN_OR_RETURN(r.memory, MemoryFlag("--memory", o.memory));
  }
  if (!o.checkpoint_interval.empty()) {
    TESSERA_ASSIGN_OR_RETURN(d.checkpoint_interval,
                             DurationFlag("--checkpoint-interval", o.checkpoint_interval));
  }
  if (!o.runtime_limit.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::optional<std::string> limit,
                             RuntimeLimitFlag("--runtime-limit", o.runtime_limit));
    d.runtime_limit = limit.value_or("");
  }
  d.submit_dir = o.submit_dir;
  d.hold_if_unfit = o.hold_if_unfit;
  if (!o.restart_max.empty()) {
    StatusOr<int64_t> max = ParseInt64(o.restart_max);
    if (!max.ok()) {
      return InvalidArgumentError("--restart-max expects a number of restarts, got '" +
                                  o.restart_max + "'");
    }
    d.restart.max = *max;  // the range is the codec's
  }
  if (!o.restart_on.empty()) {
    TESSERA_ASSIGN_OR_RETURN(d.restart.on, RestartOnFlag("--restart-on", o.restart_on));
  }
  if (!o.restart_backoff.empty()) {
    TESSERA_ASSIGN_OR_RETURN(d.restart.backoff,
                             DurationFlag("--restart-backoff", o.restart_backoff));
  }
  return d;
}

StatusOr<json> BuildJobSpec(const SubmitOptions& o) {
  TESSERA_ASSIGN_OR_RETURN(JobDraft draft, JobDraftFromFlags(o));
  return JobDraftToJson(draft);
}

// The directory the user runs `tessera submit` in, as the shell names it: $PWD keeps
// the symlinks the user sees (the same tree may be mounted elsewhere on the nodes) when
// it is this directory. "" when it cannot be sent: the controller would refuse the job.
std::string CurrentDirForJobs() {
  std::error_code ec;
  std::string dir = std::filesystem::current_path(ec).string();
  const char* pwd = std::getenv("PWD");
  if (pwd != nullptr && pwd[0] == '/' &&
      std::filesystem::equivalent(std::filesystem::path(pwd), std::filesystem::path(dir), ec)) {
    dir = pwd;
  }
  if (ec || dir.empty() || dir[0] != '/' || dir.size() > 4096 || !IsValidUtf8(dir)) {
    return "";
  }
  return dir;
}

namespace {

std::string WithSubmitDir(const std::string& body, bool is_json, const std::string& dir) {
  return dir.empty() ? body : WithField(body, is_json, std::string(job_keys::kSubmitDir), json(dir));
}

// A file of several jobs (a `jobs:` list): one POST /v1/jobs/batch, all or none; the
// ids one a line, in the file's order.
int SubmitBatchFile(const ClientConfig& config, const SubmitOptions& o, const std::string& body,
                    const std::string& content_type, std::ostream& out, std::ostream& err) {
  TESSERA_CLI_ASSIGN_OR_REPORT(std::unique_ptr<ApiClient> client, Connect(config), err);
  // Without the user's key, one of our own: a batch sent again to another controller
  // after an unanswered attempt is then not submitted twice.
  const std::string key = o.idempotency_key.empty() ? NewIdempotencyKey() : o.idempotency_key;
  TESSERA_CLI_ASSIGN_OR_REPORT(SubmittedBatch batch,
                               SubmitJobBatch(*client, body, content_type, key), err);
  if (o.output == "json") {
    out << json{{"ids", batch.ids}}.dump() << "\n";
  } else {
    for (int64_t id : batch.ids) {
      out << id << "\n";
    }
  }
  if (!batch.created && !o.idempotency_key.empty()) {
    err << "tessera: these " << batch.ids.size()
        << " jobs were already submitted with this idempotency key\n";
  }
  return 0;
}

}  // namespace

int RunSubmit(const ClientConfig& config, const SubmitOptions& o, std::ostream& out,
              std::ostream& err) {
  TESSERA_CLI_RETURN_IF_ERROR(CheckOutput(o.output, {"json"}), err);
  std::string body;
  std::string content_type;
  if (!o.file.empty()) {
    const bool flags = !o.name.empty() || !o.queue.empty() || !o.replicas.empty() ||
                       !o.gpus.empty() || !o.gpu_model.empty() || !o.gpu_fraction.empty() ||
                       !o.gpu_memory.empty() || !o.mig.empty() || !o.cpu.empty() ||
                       !o.memory.empty() || !o.priority.empty() || !o.checkpoint_interval.empty() ||
                       !o.runtime_limit.empty() || !o.env.empty() || !o.command.empty() ||
                       !o.restart_max.empty() || !o.restart_on.empty() ||
                       !o.restart_backoff.empty();
    if (flags) {
      return ReportError(InvalidArgumentError("-f takes the whole job spec from the file; it "
                                              "cannot be combined with job flags or a command"),
                         err);
    }
    TESSERA_CLI_ASSIGN_OR_REPORT(body, ReadInput(o.file), err);
    const std::string_view trimmed = Trim(body);
    if (trimmed.empty()) {
      return ReportError(InvalidArgumentError("'" + o.file + "' is empty"), err);
    }
    content_type = EndsWith(o.file, ".json") || trimmed.front() == '{' ? "application/json"
                                                                       : "application/yaml";
    body = WithSubmitDir(body, content_type == "application/json", o.submit_dir);
    if (LooksLikeJobBatch(body)) {
      if (o.hold_if_unfit) {
        return ReportError(InvalidArgumentError("--hold-if-unfit takes one job; in a file of "
                                                "several, set hold_if_unfit: true on each job"),
                           err);
      }
      return SubmitBatchFile(config, o, body, content_type, out, err);
    }
    if (o.hold_if_unfit) {
      TESSERA_CLI_ASSIGN_OR_REPORT(
          body, WithHoldIfUnfit(body, content_type == "application/json"), err);
    }
  } else {
    TESSERA_CLI_ASSIGN_OR_REPORT(json spec, BuildJobSpec(o), err);
    body = spec.dump(-1, ' ', false, json::error_handler_t::replace);
    content_type = "application/json";
  }
  // Without the user's key, one of our own (see SubmitBatchFile).
  ExtraHeaders headers{
      {"Idempotency-Key", o.idempotency_key.empty() ? NewIdempotencyKey() : o.idempotency_key}};
  TESSERA_CLI_ASSIGN_OR_REPORT(std::unique_ptr<ApiClient> client, Connect(config), err);
  TESSERA_CLI_ASSIGN_OR_REPORT(ApiResponse response,
                               client->Post("/v1/jobs", body, content_type, headers), err);
  if (o.output == "json") {
    PrintJsonBody(response.body, out);
    return 0;
  }
  TESSERA_CLI_ASSIGN_OR_REPORT(json job, ParseJsonBody(response.body, "POST /v1/jobs"), err);
  std::optional<int64_t> id = OptInt(job, "id");
  if (!id.has_value()) {
    return ReportError(InternalError("the controller's answer to POST /v1/jobs has no job id"),
                       err);
  }
  out << *id << "\n";
  if (response.status == 200 && !o.idempotency_key.empty()) {
    err << "tessera: job " << *id << " was already submitted with this idempotency key\n";
  }
  return 0;
}

// ---------------------------------------------------------------------------------
// jobs, show, cancel

int RunJobs(const ClientConfig& config, const JobsOptions& o, const Clock& clock, std::ostream& out,
            std::ostream& err) {
  TESSERA_CLI_RETURN_IF_ERROR(CheckOutput(o.output, {"wide", "json"}), err);
  if (o.limit < 0) {
    return ReportError(InvalidArgumentError("--limit must be >= 0"), err);
  }
  if (o.start && o.all) {
    return ReportError(InvalidArgumentError("--start lists pending jobs by position; --all "
                                            "(every state) does not apply to it"),
                       err);
  }
  QueryParams query;
  if (!o.state.empty()) {
    query.emplace_back("state", o.state);
  } else if (o.start) {
    query.emplace_back("state", "pending");
  } else if (!o.all) {
    query.emplace_back("state", "pending,running,stopping");
  }
  if (!o.queue.empty()) {
    query.emplace_back("queue", o.queue);
  }
  if (!o.tenant.empty()) {
    query.emplace_back("tenant", o.tenant);
  }
  if (!o.user.empty()) {
    query.emplace_back("user", o.user);
  }
  // With --start, --limit counts positions: every pending job is fetched and sorted
  // first (the server pages by id).
  const size_t page_limit = o.start ? 0 : static_cast<size_t>(o.limit);
  if (page_limit > 0) {
    query.emplace_back("limit", std::to_string(page_limit));
  }
  TESSERA_CLI_ASSIGN_OR_REPORT(std::unique_ptr<ApiClient> client, Connect(config), err);
  // The server answers in pages ("next" is the cursor): follow them up to the limit.
  json jobs = json::array();
  std::string after;
  for (;;) {
    QueryParams page = query;
    if (!after.empty()) {
      page.emplace_back("after", after);
    }
    TESSERA_CLI_ASSIGN_OR_REPORT(ApiResponse response, client->Get("/v1/jobs", page), err);
    TESSERA_CLI_ASSIGN_OR_REPORT(json body, ParseJsonBody(response.body, "GET /v1/jobs"), err);
    for (const json& j : Array(body, "jobs")) {
      jobs.push_back(j);
    }
    const json& next = body.value("next", json());
    if (!next.is_string() || next.get<std::string>().empty() ||
        (page_limit > 0 && jobs.size() >= page_limit)) {
      break;
    }
    after = next.get<std::string>();
  }
  if (o.start) {
    jobs = ByPosition(jobs);
  }
  if (o.limit > 0 && jobs.size() > static_cast<size_t>(o.limit)) {
    jobs.erase(jobs.begin() + o.limit, jobs.end());
  }
  if (o.output == "json") {
    out << Pretty(json{{"jobs", jobs}}) << "\n";
    return 0;
  }
  if (o.start) {
    out << JobsStartTable(jobs, Now(clock));
    return 0;
  }
  if (!o.expand_arrays) {
    jobs = FoldArrays(jobs);
  }
  out << JobsTable(jobs, o.output == "wide", Now(clock));
  return 0;
}

int RunShow(const ClientConfig& config, const ShowOptions& o, const Clock& clock, std::ostream& out,
            std::ostream& err) {
  TESSERA_CLI_RETURN_IF_ERROR(CheckOutput(o.output, {"json"}), err);
  TESSERA_CLI_ASSIGN_OR_REPORT(std::string id, ParseJobId(o.job), err);
  TESSERA_CLI_ASSIGN_OR_REPORT(std::unique_ptr<ApiClient> client, Connect(config), err);
  const std::string path = "/v1/jobs/" + id;
  TESSERA_CLI_ASSIGN_OR_REPORT(ApiResponse response, client->Get(path), err);
  if (o.output == "json") {
    PrintJsonBody(response.body, out);
    return 0;
  }
  TESSERA_CLI_ASSIGN_OR_REPORT(json job, ParseJsonBody(response.body, "GET " + path), err);
  out << JobDetails(job, Now(clock));
  return 0;
}

int RunWait(const ClientConfig& config, const WaitOptions& o, const Clock& clock,
            std::ostream& out, std::ostream& err) {
  if (o.until != "done" && o.until != "running") {
    return ReportError(InvalidArgumentError("--for must be done or running, got '" + o.until + "'"),
                       err);
  }
  if (o.jobs.empty()) {
    return ReportError(InvalidArgumentError("name at least one job"), err);
  }
  std::vector<std::string> ids;
  for (const std::string& j : o.jobs) {
    TESSERA_CLI_ASSIGN_OR_REPORT(std::string id, ParseJobId(j), err);
    ids.push_back(id);
  }
  TESSERA_CLI_ASSIGN_OR_REPORT(std::unique_ptr<ApiClient> client, Connect(config), err);
  const Micros deadline = clock.NowMicros() + o.timeout;
  std::map<std::string, std::string> final_state;
  while (true) {
    for (const std::string& id : ids) {
      if (final_state.count(id) > 0) {
        continue;
      }
      const std::string path = "/v1/jobs/" + id;
      TESSERA_CLI_ASSIGN_OR_REPORT(json job, client->GetJson(path, {}), err);
      const std::string state = job.value("state", "");
      const bool terminal = state == "succeeded" || state == "failed" || state == "cancelled";
      if (terminal || (o.until == "running" && state != "pending")) {
        final_state[id] = state;
        out << id << " " << state << "\n";
      }
    }
    if (final_state.size() == ids.size()) {
      break;
    }
    if (clock.NowMicros() >= deadline) {
      err << "tessera: timed out waiting for " << (ids.size() - final_state.size()) << " job(s)\n";
      return 124;
    }
    if (o.sleep) {
      o.sleep(o.poll_interval_ms);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_interval_ms));
    }
  }
  for (const auto& [id, state] : final_state) {
    if (state == "failed" || state == "cancelled") {
      return 1;
    }
  }
  return 0;
}

int RunCancel(const ClientConfig& config, const CancelOptions& o, std::ostream& out,
              std::ostream& err) {
  TESSERA_CLI_RETURN_IF_ERROR(CheckOutput(o.output, {"json"}), err);
  if (o.jobs.empty()) {
    return ReportError(InvalidArgumentError("name at least one job to cancel"), err);
  }
  std::vector<std::string> ids;
  for (const std::string& text : o.jobs) {
    TESSERA_CLI_ASSIGN_OR_REPORT(std::string id, ParseJobId(text), err);
    ids.push_back(id);
  }
  TESSERA_CLI_ASSIGN_OR_REPORT(std::unique_ptr<ApiClient> client, Connect(config), err);
  int exit_code = 0;
  json answers = json::array();
  for (const std::string& id : ids) {
    const std::string path = "/v1/jobs/" + id + "/cancel";
    StatusOr<ApiResponse> response = client->Post(path, "", "application/json");
    StatusOr<json> job = response.ok() ? ParseJsonBody(response->body, "POST " + path)
                                       : StatusOr<json>(response.status());
    if (!job.ok()) {
      const int code = ReportError(job.status(), err);
      exit_code = exit_code == 0 ? code : exit_code;
      if (code == 5) {
        break;  // the next ones would fail the same way
      }
      continue;
    }
    if (o.output == "json") {
      answers.push_back(*job);
      continue;
    }
    if (const json* all = Field(*job, "jobs"); all != nullptr && all->is_array()) {
      out << "array " << id << ": " << all->size() << " elements cancelled or stopping\n";
      continue;
    }
    const std::string state = Str(*job, "state");
    if (state == "cancelled") {
      out << "job " << id << " cancelled\n";
    } else if (state == "stopping") {
      out << "job " << id << " stopping\n";
    } else {
      out << "job " << id << " is " << (state.empty() ? "in an unknown state" : state) << "\n";
    }
  }
  if (o.output == "json" && !answers.empty()) {
    out << Pretty(answers.size() == 1 ? answers[0] : answers) << "\n";
  }
  return exit_code;
}

// ---------------------------------------------------------------------------------
// drain, resume

int RunDrain(const ClientConfig& config, const DrainOptions& o, std::ostream& out,
             std::ostream& err) {
  TESSERA_CLI_RETURN_IF_ERROR(CheckOutput(o.output, {"json"}), err);
  if (o.drain && o.reason.empty()) {
    return ReportError(InvalidArgumentError("say why with --reason"), err);
  }
  json body = json::object();
  if (o.gpu >= 0) {
    body["gpu"] = o.gpu;
  }
  if (o.drain) {
    body["reason"] = o.reason;
  }
  TESSERA_CLI_ASSIGN_OR_REPORT(std::unique_ptr<ApiClient> client, Connect(config), err);
  const std::string path = "/v1/nodes/" + o.node + (o.drain ? "/drain" : "/resume");
  TESSERA_CLI_ASSIGN_OR_REPORT(ApiResponse response,
                               client->Post(path, body.dump(), "application/json"), err);
  TESSERA_CLI_ASSIGN_OR_REPORT(json node, ParseJsonBody(response.body, "POST " + path), err);
  if (o.output == "json") {
    out << Pretty(node) << "\n";
    return 0;
  }
  const std::string what = o.gpu >= 0 ? "node " + o.node + " GPU " + std::to_string(o.gpu)
                                      : "node " + o.node;
  out << what << (o.drain ? " drained: no new work lands on it; what runs there keeps running\n"
                          : " takes new work\n");
  return 0;
}

// ---------------------------------------------------------------------------------
// logs

int RunLogs(const ClientConfig& config, const LogsOptions& o, std::ostream& out,
            std::ostream& err) {
  TESSERA_CLI_ASSIGN_OR_REPORT(std::string id, ParseJobId(o.job), err);
  if (o.task < 0 || o.offset < 0 || o.poll_interval_ms < 0) {
    return ReportError(InvalidArgumentError("--task and the offset must be >= 0"), err);
  }
  TESSERA_CLI_ASSIGN_OR_REPORT(std::unique_ptr<ApiClient> client, Connect(config), err);
  const std::string path = "/v1/jobs/" + id + "/logs";
  const std::function<void(int64_t)> sleep = o.sleep ? o.sleep : SleepMillis;
  int64_t offset = o.offset;
  for (int64_t requests = 1;; ++requests) {
    TESSERA_CLI_ASSIGN_OR_REPORT(
        ApiResponse response,
        client->Get(path, {{"task", std::to_string(o.task)}, {"offset", std::to_string(offset)}}),
        err);
    out << response.body;
    out.flush();
    const int64_t fallback = offset + static_cast<int64_t>(response.body.size());
    StatusOr<int64_t> next = ParseInt64(response.Header("X-Log-Offset"));
    const int64_t next_offset = next.ok() && *next >= 0 ? *next : fallback;
    // Bytes that do not move the offset are not progress: a broken server must not
    // make us print the same bytes forever.
    const bool progress = !response.body.empty() && next_offset > offset;
    offset = next_offset;
    if (o.max_requests > 0 && requests >= o.max_requests) {
      break;
    }
    if (progress) {
      continue;
    }
    if (!o.follow || IsTerminal(response.Header("X-Job-State"))) {
      break;
    }
    sleep(o.poll_interval_ms);
  }
  return 0;
}

// ---------------------------------------------------------------------------------
// nodes, queues, usage

int RunNodes(const ClientConfig& config, const NodesOptions& o, const Clock& clock,
             std::ostream& out, std::ostream& err) {
  TESSERA_CLI_RETURN_IF_ERROR(CheckOutput(o.output, {"json"}), err);
  TESSERA_CLI_ASSIGN_OR_REPORT(std::unique_ptr<ApiClient> client, Connect(config), err);
  TESSERA_CLI_ASSIGN_OR_REPORT(ApiResponse response, client->Get("/v1/nodes"), err);
  if (o.output == "json") {
    PrintJsonBody(response.body, out);
    return 0;
  }
  TESSERA_CLI_ASSIGN_OR_REPORT(json body, ParseJsonBody(response.body, "GET /v1/nodes"), err);
  const json& nodes = Array(body, "nodes");
  out << NodesTable(nodes, Now(clock));
  if (o.gpus) {
    out << "\n" << GpuMap(nodes);
  }
  return 0;
}

// `tessera nodes remove NODE` (admin): forgets the node (refused while jobs run on it
// and it is up) so that its name may join afresh with the join token. The CLI's client
// has no DELETE: it posts to /v1/nodes/{name}/remove, the same operation.
// `tessera nodes revoke NODE` (admin): its credential stops working at once; the node
// is down and its work runs elsewhere.
int RunNodesRemove(const ClientConfig& config, const std::string& node, std::ostream& out,
                   std::ostream& err, bool revoke) {
  TESSERA_CLI_ASSIGN_OR_REPORT(std::unique_ptr<ApiClient> client, Connect(config), err);
  const std::string path = "/v1/nodes/" + node + (revoke ? "/revoke" : "/remove");
  TESSERA_CLI_ASSIGN_OR_REPORT(ApiResponse response, client->Post(path, "", "application/json"),
                               err);
  (void)response;
  out << "node " << node
      << (revoke ? " revoked: its agent is refused from now on; its work runs elsewhere; "
                   "`tessera nodes remove` lets it join again\n"
                 : " removed: its inventory, drains and credential are gone; it may join "
                   "again\n");
  return 0;
}

int RunQueues(const ClientConfig& config, const QueuesOptions& o, std::ostream& out,
              std::ostream& err) {
  TESSERA_CLI_RETURN_IF_ERROR(CheckOutput(o.output, {"json"}), err);
  TESSERA_CLI_ASSIGN_OR_REPORT(std::unique_ptr<ApiClient> client, Connect(config), err);
  TESSERA_CLI_ASSIGN_OR_REPORT(ApiResponse response, client->Get("/v1/queues"), err);
  if (o.output == "json") {
    PrintJsonBody(response.body, out);
    return 0;
  }
  TESSERA_CLI_ASSIGN_OR_REPORT(json body, ParseJsonBody(response.body, "GET /v1/queues"), err);
  out << QueuesTable(Array(body, "queues"));
  return 0;
}

int RunQueuesSet(const ClientConfig& config, const QueuesSetOptions& o, std::ostream& out,
                 std::ostream& err) {
  TESSERA_CLI_RETURN_IF_ERROR(CheckOutput(o.output, {"json"}), err);
  if (o.file.empty()) {
    return ReportError(InvalidArgumentError("give the queue configuration with -f FILE"), err);
  }
  TESSERA_CLI_ASSIGN_OR_REPORT(std::string yaml, ReadInput(o.file), err);
  if (Trim(yaml).empty()) {
    return ReportError(InvalidArgumentError("'" + o.file + "' is empty"), err);
  }
  TESSERA_CLI_ASSIGN_OR_REPORT(std::unique_ptr<ApiClient> client, Connect(config), err);
  TESSERA_CLI_ASSIGN_OR_REPORT(ApiResponse response,
                               client->Put("/v1/queues", yaml, "application/yaml"), err);
  if (o.output == "json") {
    PrintJsonBody(response.body, out);
    return 0;
  }
  json body = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  const json* queues = body.is_discarded() ? nullptr : Field(body, "queues");
  out << "queue configuration replaced";
  if (queues != nullptr && queues->is_array()) {
    out << " (" << queues->size() << (queues->size() == 1 ? " queue)" : " queues)");
  }
  out << "\n";
  return 0;
}

int RunUsage(const ClientConfig& config, const UsageOptions& o, const Clock& clock,
             std::ostream& out, std::ostream& err) {
  TESSERA_CLI_RETURN_IF_ERROR(CheckOutput(o.output, {"json", "csv"}), err);
  if (o.by != "tenant" && o.by != "queue" && o.by != "job" && o.by != "user") {
    return ReportError(
        InvalidArgumentError("--by must be tenant, queue, job or user (got '" + o.by + "')"), err);
  }
  const Micros now = Now(clock);
  StatusOr<Micros> since = ParseTimeArgument(o.since, now);
  if (!since.ok()) {
    return ReportError(InvalidArgumentError("--since: " + since.status().message()), err);
  }
  StatusOr<Micros> until = ParseTimeArgument(o.until, now);
  if (!until.ok()) {
    return ReportError(InvalidArgumentError("--until: " + until.status().message()), err);
  }
  if (*until < *since) {
    return ReportError(InvalidArgumentError("--until is before --since"), err);
  }
  TESSERA_CLI_ASSIGN_OR_REPORT(std::unique_ptr<ApiClient> client, Connect(config), err);
  TESSERA_CLI_ASSIGN_OR_REPORT(ApiResponse response,
                               client->Get("/v1/usage", {{"since", FormatRfc3339(*since)},
                                                         {"until", FormatRfc3339(*until)},
                                                         {"by", o.by}}),
                               err);
  if (o.output == "json") {
    PrintJsonBody(response.body, out);
    return 0;
  }
  TESSERA_CLI_ASSIGN_OR_REPORT(json body, ParseJsonBody(response.body, "GET /v1/usage"), err);
  if (o.by == "user" && body.contains("rows") && body["rows"].is_array()) {
    for (json& row : body["rows"]) {  // a user is named within its tenant
      row["key"] = Str(row, "tenant") + "/" + Str(row, "key");
    }
  }
  if (o.output == "csv") {
    out << UsageCsv(body, o.by);
    return 0;
  }
  out << UsageTable(body, o.by, FormatRfc3339(*since), FormatRfc3339(*until));
  return 0;
}

}  // namespace tessera
