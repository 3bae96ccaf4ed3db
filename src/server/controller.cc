#include "server/controller.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>

#include "api/queue_config.h"
#include "base/time_format.h"
#include "plugins/registry.h"
#include "sched/runtime_predictor.h"

namespace tessera {
namespace {

constexpr const char* kQueuesKey = "queues.yaml";

bool Terminal(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

nlohmann::json TimeOrNull(Micros t) {
  return t > 0 ? nlohmann::json(FormatRfc3339(t)) : nlohmann::json(nullptr);
}

// A task of the current attempt as stored with the placement: where it runs and, once
// it has exited, how; so that an exit the controller acknowledged before a crash is
// never taken for a task still to run.
struct StoredTask {
  std::string node;
  bool exited = false;
  int exit_code = 0;
  int signal = 0;
};

// Placement as stored: one allocation per task, nodes by name (NodeIds change when
// the node set does), the tasks' exits, and what happens once a stopping job's tasks
// have all exited ("requeue", "cancel", "fail"; "" while it runs).
nlohmann::json PlacementJson(const std::vector<Allocation>& allocations,
                             const std::vector<StoredTask>& tasks, Micros run_start,
                             const std::string& after) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < allocations.size(); ++i) {
    const Allocation& a = allocations[i];
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuGrant& g : a.gpus) {
      gpus.push_back({{"gpu", g.gpu},
                      {"milli", g.milli.value()},
                      {"memory", g.memory.value()},
                      {"mig_profile", g.mig_profile},
                      {"mig_start", g.mig_start}});
    }
    const StoredTask& t = tasks[i];
    out.push_back({{"node", t.node},
                   {"cpu", a.cpu.value()},
                   {"memory", a.memory.value()},
                   {"gpus", std::move(gpus)},
                   {"exited", t.exited},
                   {"exit_code", t.exit_code},
                   {"signal", t.signal}});
  }
  return {{"run_start", run_start}, {"tasks", std::move(out)}, {"after", after}};
}

// The inverse of PlacementJson; node ids are left invalid (bound at attach time).
Status ParsePlacement(const std::string& text, std::vector<Allocation>* allocations,
                      std::vector<StoredTask>* tasks, Micros* run_start, std::string* after) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return InternalError("stored placement is not a JSON object");
  }
  try {
    *run_start = j.at("run_start").get<Micros>();
    for (const nlohmann::json& t : j.at("tasks")) {
      Allocation a;
      a.cpu = MilliCpu(t.at("cpu").get<int64_t>());
      a.memory = MiB(t.at("memory").get<int64_t>());
      for (const nlohmann::json& g : t.at("gpus")) {
        GpuGrant grant;
        grant.gpu = g.at("gpu").get<int>();
        grant.milli = MilliGpu(g.at("milli").get<int64_t>());
        grant.memory = MiB(g.at("memory").get<int64_t>());
        grant.mig_profile = g.at("mig_profile").get<int>();
        grant.mig_start = g.at("mig_start").get<int>();
        a.gpus.push_back(grant);
      }
      allocations->push_back(std::move(a));
      StoredTask st;
      st.node = t.at("node").get<std::string>();
      st.exited = t.value("exited", false);
      st.exit_code = t.value("exit_code", 0);
      st.signal = t.value("signal", 0);
      tasks->push_back(std::move(st));
    }
    *after = j.value("after", "");
  } catch (const nlohmann::json::exception& e) {
    return InternalError(std::string("stored placement: ") + e.what());
  }
  return Status::Ok();
}

std::string QueueKey(const std::string& tenant, const std::string& key) {
  return tenant + '\x1f' + key;
}

nlohmann::json RunAsJson(const std::optional<std::pair<int64_t, int64_t>>& id) {
  if (!id) {
    return nullptr;
  }
  return {{"uid", id->first}, {"gid", id->second}};
}

}  // namespace

// ---- construction and recovery ------------------------------------------------

Controller::Controller(ControllerOptions options, Store* store, const GpuCatalog& catalog,
                       const Clock& clock)
    : options_(std::move(options)),
      store_(store),
      catalog_(&catalog),
      clock_(&clock),
      rng_(options_.seed) {}

Controller::~Controller() { Stop(); }

StatusOr<std::unique_ptr<Controller>> Controller::Open(ControllerOptions options, Store* store,
                                                       const GpuCatalog& catalog,
                                                       const Clock& clock,
                                                       const std::string& queues_yaml) {
  std::unique_ptr<Controller> c(new Controller(std::move(options), store, catalog, clock));
  TESSERA_RETURN_IF_ERROR(c->Load(queues_yaml));
  return c;
}

Status Controller::ApplyQueueYaml(const std::string& yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(std::string("queue configuration: ") + e.what());
  }
  TESSERA_ASSIGN_OR_RETURN(QueueTreeSpec spec, ParseQueueTreeYaml(root, *catalog_));
  TESSERA_ASSIGN_OR_RETURN(QueueTree tree, QueueTree::Create(std::move(spec), *catalog_));
  tree_ = std::make_unique<QueueTree>(std::move(tree));
  queues_yaml_ = yaml;
  rebuild_ = true;
  return Status::Ok();
}

Status Controller::Load(const std::string& queues_yaml) {
  if (options_.scheduler_policy) {
    policy_ = *options_.scheduler_policy;
  } else {
    TESSERA_ASSIGN_OR_RETURN(policy_, ParseSchedulerPolicy(options_.policy));
    policy_.options.min_run_before_reclaim =
        std::max(policy_.options.min_run_before_reclaim, options_.min_run_before_reclaim);
  }
  const SchedulerOptions& so = policy_.options;
  if (so.runtime_source == RuntimeSource::kOracle || so.preempt_srtf || so.lossless_preemption) {
    return FailedPreconditionError(
        "policy '" + policy_.name +
        "' is an oracle reference: it needs jobs' true runtimes or preemptions that lose no "
        "work, which only the simulator has; choose another policy for a live cluster");
  }
  TESSERA_ASSIGN_OR_RETURN(std::optional<std::string> stored, store_->GetKv(kQueuesKey));
  const std::string yaml = stored ? *stored : queues_yaml;
  TESSERA_RETURN_IF_ERROR(ApplyQueueYaml(yaml));
  lifecycle_ = std::make_unique<JobLifecycle>(
      &records_, tree_.get(), &predictor_,
      JobLifecycle::Options{policy_.uses_predictor, /*lossless_preemption=*/false});
  forwarder_.controller = this;
  lifecycle_->set_listener(options_.lifecycle_listener != nullptr ? &forwarder_ : nullptr);
  if (!stored) {
    WriteBatch b;
    b.kv.emplace_back(kQueuesKey, yaml);
    TESSERA_RETURN_IF_ERROR(store_->Commit(std::move(b)));
  }

  const Micros now = clock_->NowMicros();
  TESSERA_ASSIGN_OR_RETURN(auto stored_nodes, store_->ListKv(kNodeKeyPrefix));
  for (const auto& [key, text] : stored_nodes) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) {
      return InternalError("stored node '" + key + "' is not JSON");
    }
    TESSERA_ASSIGN_OR_RETURN(NodeInventory inv, NodeInventoryFromJson(j, *catalog_));
    NodeInfo& n = nodes_[inv.spec.name];
    n.seq = next_node_seq_++;
    n.inventory = std::move(inv);
    n.up = false;
    n.reason = "waiting for its agent after a controller restart";
    n.last_seen = now;  // the agent gets a full timeout to come back
  }

  TESSERA_RETURN_IF_ERROR(LoadDrains());
  TESSERA_RETURN_IF_ERROR(LoadIdentities());
  LoadHistory();
  history_saved_at_ = now;
  history_observations_ = predictor_.observations();
  TESSERA_ASSIGN_OR_RETURN(std::vector<UsageRow> usage,
                           store_->LoadUsage(0, std::numeric_limits<int64_t>::max()));
  for (const UsageRow& u : usage) {
    tenant_gpu_seconds_[u.tenant] += static_cast<double>(u.gpu_milli) / 1000.0 *
                                     static_cast<double>(u.end_us - u.start_us) / 1e6;
  }

  TESSERA_ASSIGN_OR_RETURN(std::vector<JobRow> rows, store_->LoadJobs());
  for (JobRow& row : rows) {
    next_id_ = std::max(next_id_, row.id + 1);
  }
  for (JobRow& row : rows) {
    nlohmann::json spec = nlohmann::json::parse(row.spec_json, nullptr, false);
    if (spec.is_discarded()) {
      return InternalError("job " + std::to_string(row.id) + ": stored spec is not JSON");
    }
    StatusOr<JobSubmission> sub = JobSubmissionFromJson(spec, *catalog_);
    if (!sub.ok()) {
      return InternalError("job " + std::to_string(row.id) + ": " + sub.status().message());
    }
    const uint64_t id = row.id;
    Job& job = jobs_[id];
    job.durable = true;
    job.submission = std::move(sub).value();
    job.submission.spec.queue = row.queue;
    job.row = std::move(row);
    if (!job.row.idempotency_key.empty()) {
      idempotency_[QueueKey(job.row.tenant, job.row.idempotency_key)] = id;
    }
    job.slot = AllocSlot(id);
    JobRecord& rec = Rec(job);
    // Known before the first cycle: an agent may report an exit before then.
    if (StatusOr<QueueId> q = tree_->FindQueue(job.row.queue); q.ok()) {
      rec.queue = q.value();
    }
    rec.spec = job.submission.spec;
    rec.spec.submit_time = job.row.submit_us;
    rec.gpu_milli = rec.spec.TotalGpuMilli(*catalog_);
    rec.resumed_from = job.row.progress_us;
    rec.preemptions = job.row.preemptions;
    rec.eligible_since = job.row.submit_us;
    const std::string& st = job.row.state;
    if (Terminal(st)) {
      rec.phase = JobPhase::kFinished;
      finished_order_.push_back(id);
    } else if (st == "pending") {
      rec.phase = JobPhase::kPending;
    } else {
      rec.phase = st == "stopping" ? JobPhase::kStopping : JobPhase::kRunning;
      std::vector<StoredTask> stored_tasks;
      std::string after;
      TESSERA_RETURN_IF_ERROR(
          ParsePlacement(job.row.placement_json, &rec.allocations, &stored_tasks, &rec.run_start,
                         &after));
      std::vector<std::string> task_nodes;
      job.tasks.resize(stored_tasks.size());
      for (size_t t = 0; t < stored_tasks.size(); ++t) {
        job.tasks[t].node = stored_tasks[t].node;
        job.tasks[t].exited = stored_tasks[t].exited;
        job.tasks[t].exit_code = stored_tasks[t].exit_code;
        job.tasks[t].signal = stored_tasks[t].signal;
        task_nodes.push_back(stored_tasks[t].node);
      }
      job.after = after == "cancel" ? AfterStop::kCancel
                  : after == "fail" ? AfterStop::kFail
                  : after == "requeue" || rec.phase == JobPhase::kStopping ? AfterStop::kRequeue
                                                                         : AfterStop::kNone;
      // A node nobody has heard of since the restart: known only through this job.
      for (const std::string& n : task_nodes) {
        if (nodes_.find(n) == nodes_.end()) {
          NodeInfo& info = nodes_[n];
          info.seq = next_node_seq_++;
          info.inventory.spec.name = n;
          info.up = false;
          info.reason = "waiting for its agent after a controller restart";
          info.last_seen = now;
        }
      }
    }
  }
  Archive(now);  // the oldest finished jobs stay in the store only
  return Status::Ok();
}

void Controller::Start() {
  std::lock_guard<std::mutex> lock(loop_mu_);
  if (loop_.joinable()) {
    return;
  }
  stopping_ = false;
  loop_ = std::thread([this] { Loop(); });
}

void Controller::Stop() {
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.notify_all();
  if (loop_.joinable()) {
    loop_.join();
  }
}

void Controller::Wake() {
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    wake_ = true;
  }
  loop_cv_.notify_all();
}

void Controller::Loop() {
  std::unique_lock<std::mutex> lock(loop_mu_);
  while (!stopping_) {
    loop_cv_.wait_for(lock, std::chrono::microseconds(options_.cycle_interval),
                      [this] { return stopping_ || wake_; });
    if (stopping_) {
      break;
    }
    wake_ = false;
    lock.unlock();
    Status s = RunCycle();
    if (!s.ok()) {
      std::cerr << "tessera server: scheduling cycle: " << s.ToString() << "\n";
    }
    lock.lock();
  }
}

// ---- the cluster as the core sees it ----------------------------------------------

Status Controller::RebuildScheduler() {
  std::vector<const NodeInfo*> up;
  for (const auto& [name, node] : nodes_) {
    if (node.up) {
      up.push_back(&node);
    }
  }
  std::sort(up.begin(), up.end(),
            [](const NodeInfo* a, const NodeInfo* b) { return a->seq < b->seq; });
  std::vector<NodeSpec> specs;
  for (const NodeInfo* node : up) {
    specs.push_back(node->inventory.spec);
  }
  TESSERA_ASSIGN_OR_RETURN(ClusterState state, ClusterState::Create(std::move(specs), *catalog_));
  state_ = std::make_unique<ClusterState>(std::move(state));
  for (const auto& [name, node] : nodes_) {
    if (node.up) {
      ApplyDrains(node);
    }
  }
  quota_ = std::make_unique<QuotaLedger>(*tree_);
  capacity_ = Capacity{};
  reservation_.reset();
  for (size_t n = 0; n < state_->node_count(); ++n) {
    const NodeSpec& spec = state_->spec(NodeId(n));
    capacity_.cpu = std::max(capacity_.cpu, spec.cpu.value());
    capacity_.memory = std::max(capacity_.memory, spec.memory.value());
    std::map<std::pair<uint32_t, int>, int> here;
    for (const GpuSpec& g : spec.gpus) {
      ++here[{g.model.value(), static_cast<int>(g.mode)}];
    }
    for (const auto& [key, count] : here) {
      capacity_.gpus[key] = std::max(capacity_.gpus[key], count);
    }
  }
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<JobOrderPlugin> job_order,
                           MakeJobOrder(policy_.job_order, policy_.options));
  std::unique_ptr<QueueOrderPlugin> queue_order;
  if (!policy_.queue_order.empty()) {
    TESSERA_ASSIGN_OR_RETURN(queue_order, MakeQueueOrder(policy_.queue_order));
  }
  PolicyContext context{ScaleOf(*state_), nullptr};
  TESSERA_ASSIGN_OR_RETURN(Profile profile, MakeProfile(options_.placement, context));
  CarryUsage(clock_->NowMicros());  // fair share outlives the scheduler
  scheduler_ = std::make_unique<JobScheduler>(*tree_, *state_, policy_.options,
                                              std::move(job_order), std::move(queue_order),
                                              std::move(profile), policy_.fairshare_half_life);
  if (carried_usage_) {
    scheduler_->RestoreUsage(*carried_usage_);
  }
  lifecycle_->set_tree(tree_.get());
  lifecycle_->Bind(state_.get(), quota_.get(), scheduler_.get());
  for (auto& [id, job] : jobs_) {
    JobRecord& rec = Rec(job);
    if (!job.durable || rec.phase == JobPhase::kFinished) {
      continue;
    }
    StatusOr<QueueId> q = tree_->FindQueue(job.row.queue);
    if (!q.ok()) {
      return InternalError("job " + std::to_string(id) + ": queue '" + job.row.queue +
                           "' is not in the configuration");
    }
    rec.queue = q.value();
    if (rec.phase != JobPhase::kPending) {
      // Running or stopping: what still runs on nodes that are up is held again.
      rec.held.assign(rec.allocations.size(), 0);
      for (size_t t = 0; t < rec.allocations.size(); ++t) {
        StatusOr<NodeId> node = state_->FindNode(job.tasks[t].node);
        if (job.tasks[t].exited || !node.ok()) {
          continue;
        }
        rec.allocations[t].node = node.value();
        rec.held[t] = 1;
      }
    }
    TESSERA_RETURN_IF_ERROR(lifecycle_->Restore(rec));
  }
  rebuild_ = false;
  return Status::Ok();
}

// ---- users -------------------------------------------------------------------

uint32_t Controller::AllocSlot(uint64_t id) {
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(records_.size());
    records_.emplace_back();
    slot_job_.push_back(0);
  }
  records_[slot] = JobRecord{};
  records_[slot].id = JobId(slot);
  records_[slot].phase = JobPhase::kFinished;
  slot_job_[slot] = id;
  return slot;
}

void Controller::FreeSlot(uint32_t slot) {
  records_[slot] = JobRecord{};  // frees the spec and what it held
  records_[slot].id = JobId(slot);
  records_[slot].phase = JobPhase::kFinished;
  slot_job_[slot] = 0;
  free_slots_.push_back(slot);
}

void Controller::EventForwarder::OnJobEvent(const JobRecord& job, const LifecycleEvent& event) {
  LifecycleEvent e = event;
  e.job = JobId(controller->slot_job_[event.job.value()]);
  if (event.by.valid()) {
    e.by = JobId(controller->slot_job_[event.by.value()]);
  }
  controller->options_.lifecycle_listener->OnJobEvent(job, e);
}

Controller::Job* Controller::FindJob(uint64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() || !it->second.durable ? nullptr : &it->second;
}

bool Controller::Visible(const Principal& who, const Job& job) const {
  return who.role == Role::kAdmin || (who.role == Role::kTenant && who.tenant == job.row.tenant);
}

StatusOr<nlohmann::json> Controller::Submit(const Principal& who, JobSubmission job,
                                            const std::string& idempotency_key, bool* created) {
  *created = false;
  if (who.role == Role::kAgent) {
    return PermissionDeniedError("agents cannot submit jobs");
  }
  if (!healthy()) {
    return UnavailableError("the state store failed; the controller accepts no changes");
  }
  const Micros now = clock_->NowMicros();
  uint64_t id = 0;
  JobRow row;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::string tenant = who.tenant;
    std::string& queue = job.spec.queue;
    if (queue.empty()) {
      for (QueueId q : tree_->queues()) {
        if (who.role == Role::kAdmin || tree_->tenant(q) == tenant) {
          queue = tree_->spec(q).name;
          break;
        }
      }
      if (queue.empty()) {
        return FailedPreconditionError("tenant '" + tenant + "' has no queue");
      }
    }
    StatusOr<QueueId> q = tree_->FindQueue(queue);
    if (!q.ok()) {
      return InvalidArgumentError("queue: no queue named '" + queue + "'");
    }
    if (who.role == Role::kAdmin) {
      tenant = tree_->tenant(q.value());
    } else if (tree_->tenant(q.value()) != tenant) {
      return PermissionDeniedError("queue '" + queue + "' belongs to another tenant");
    }
    if (!idempotency_key.empty()) {
      auto it = idempotency_.find(QueueKey(tenant, idempotency_key));
      std::optional<Job> archived;
      const Job* found = it != idempotency_.end() ? FindOrLoad(it->second, &archived) : nullptr;
      if (found != nullptr) {
        const Job& existing = *found;
        if (!existing.durable) {
          return AbortedError("a submission with this idempotency key is in progress; retry");
        }
        // A retry must be the same request; anything else under the same key is a client
        // bug that silently returning the first job would hide. Where it was retried
        // from (submit_dir) is not part of the request.
        JobSubmission retry = job;
        retry.submit_dir = existing.submission.submit_dir;
        if (JobSubmissionToJson(retry, *catalog_) !=
            JobSubmissionToJson(existing.submission, *catalog_)) {
          return AlreadyExistsError("Idempotency-Key '" + idempotency_key +
                                    "' was already used for job " + std::to_string(it->second) +
                                    " with a different body; use a new key for a new job");
        }
        return JobJson(existing);
      }
    }
    id = next_id_++;
    job.spec.submit_time = now;
    row.id = id;
    row.tenant = tenant;
    row.queue = queue;
    row.name = job.spec.name;
    row.idempotency_key = idempotency_key;
    row.spec_json = JobSubmissionToJson(job, *catalog_).dump();
    row.state = "pending";
    row.submit_us = now;
    row.reason = "waiting for the next scheduling cycle";
    Job& j = jobs_[id];
    j.row = row;
    j.submission = std::move(job);
    j.slot = AllocSlot(id);  // finished (invisible to the core) until durable
    if (!idempotency_key.empty()) {
      idempotency_[QueueKey(tenant, idempotency_key)] = id;
    }
  }
  WriteBatch batch;
  batch.jobs.push_back(std::move(row));
  Status s = store_->Commit(std::move(batch));
  std::lock_guard<std::mutex> lock(mu_);
  Job& j = jobs_.at(id);
  if (!s.ok()) {
    if (!j.row.idempotency_key.empty()) {
      idempotency_.erase(QueueKey(j.row.tenant, j.row.idempotency_key));
    }
    FreeSlot(j.slot);
    jobs_.erase(id);
    store_failed_ = true;
    return UnavailableError("could not make the job durable: " + s.message());
  }
  j.durable = true;
  ++submitted_[j.row.queue];
  JobRecord& rec = Rec(j);
  rec.spec = j.submission.spec;
  rec.phase = JobPhase::kPending;
  rec.gpu_milli = rec.spec.TotalGpuMilli(*catalog_);
  rec.queue = tree_->FindQueue(j.row.queue).value();
  // Enqueued now when the core is current, else by the rebuild before the next cycle.
  lifecycle_->Submit(rec, now);
  *created = true;
  Wake();
  return JobJson(j);
}

StatusOr<nlohmann::json> Controller::GetJob(const Principal& who, uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<Job> archived;
  const Job* job = FindOrLoad(id, &archived);
  if (job == nullptr || !Visible(who, *job)) {
    return NotFoundError("no job " + std::to_string(id));
  }
  return JobJson(*job);
}

StatusOr<nlohmann::json> Controller::Cancel(const Principal& who, uint64_t id) {
  Pending out;
  nlohmann::json result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::optional<Job> archived;
    const Job* found = FindOrLoad(id, &archived);
    if (found == nullptr || !Visible(who, *found)) {
      return NotFoundError("no job " + std::to_string(id));
    }
    if (Terminal(found->row.state)) {  // archived jobs are all terminal
      return FailedPreconditionError("job " + std::to_string(id) + " has already " +
                                     (found->row.state == "cancelled" ? "been cancelled"
                                                                      : found->row.state));
    }
    Job* job = FindJob(id);
    const Micros now = clock_->NowMicros();
    JobRecord& rec = Rec(*job);
    if (rec.phase == JobPhase::kPending) {
      lifecycle_->Finish(rec, JobEnd::kCancelled, now);
      out.finished.push_back(id);
      job->row.state = "cancelled";
      job->row.end_us = now;
      job->row.reason = "cancelled before it started";
      out.dirty.insert(id);
    } else {
      job->row.reason = "cancelled";
      StopJob(*job, AfterStop::kCancel, options_.stop_grace, now, out);
    }
    Seal(out);
    result = JobJson(*job);
  }
  TESSERA_RETURN_IF_ERROR(Publish(std::move(out)));
  return result;
}

std::string Controller::LogPath(uint64_t job, int task) const {
  return options_.data_dir + "/logs/" + std::to_string(job) + "/" + std::to_string(task) + ".log";
}

StatusOr<LogChunk> Controller::ReadLog(const Principal& who, uint64_t id, int task,
                                       int64_t offset, int64_t max_bytes) {
  std::string path;
  LogChunk chunk;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::optional<Job> archived;
    const Job* job = FindOrLoad(id, &archived);
    if (job == nullptr || !Visible(who, *job)) {
      return NotFoundError("no job " + std::to_string(id));
    }
    const int replicas = static_cast<int>(job->submission.spec.tasks.size());
    if (task < 0 || task >= replicas) {
      return InvalidArgumentError("task must be in 0.." + std::to_string(replicas - 1));
    }
    path = LogPath(id, task);
    chunk.job_state = job->row.state;
  }
  if (offset < 0) {
    return InvalidArgumentError("offset must be >= 0");
  }
  std::ifstream in(path, std::ios::binary);
  chunk.next_offset = offset;
  if (!in) {
    return chunk;  // no output yet
  }
  in.seekg(0, std::ios::end);
  const int64_t size = in.tellg();
  if (offset >= size) {
    chunk.next_offset = std::max(offset, size);
    return chunk;
  }
  const int64_t n = std::min(max_bytes, size - offset);
  chunk.data.resize(static_cast<size_t>(n));
  in.seekg(offset);
  in.read(chunk.data.data(), n);
  chunk.next_offset = offset + n;
  return chunk;
}

void Controller::AppendLog(Job& job, int task, int64_t offset, const std::string& data) {
  TaskRun& run = job.tasks[static_cast<size_t>(task)];
  const int64_t end = offset + static_cast<int64_t>(data.size());
  if (data.empty() || end <= run.log_received) {
    return;  // already have it (a resent heartbeat)
  }
  const size_t skip = offset < run.log_received ? static_cast<size_t>(run.log_received - offset) : 0;
  const std::string path = LogPath(job.row.id, task);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(data.data() + skip, static_cast<std::streamsize>(data.size() - skip));
  run.log_received = end;
}

// ---- decisions ---------------------------------------------------------------

void Controller::Seal(Pending& out) {
  for (uint64_t id : out.dirty) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      continue;
    }
    Job& job = it->second;
    const JobRecord& rec = Rec(job);
    if ((rec.phase == JobPhase::kRunning || rec.phase == JobPhase::kStopping) &&
        !rec.allocations.empty() && rec.allocations.size() == job.tasks.size()) {
      std::vector<StoredTask> tasks;
      for (const TaskRun& r : job.tasks) {
        tasks.push_back(StoredTask{r.node, r.exited, r.exit_code, r.signal});
      }
      static constexpr const char* kAfter[] = {"", "requeue", "cancel", "fail"};
      job.row.placement_json =
          PlacementJson(rec.allocations, tasks, rec.run_start,
                        kAfter[static_cast<size_t>(job.after)])
              .dump();
    }
    out.batch.jobs.push_back(job.row);
  }
  out.dirty.clear();
}

std::string Controller::CheckpointDir(const Job& job) const {
  if (!job.submission.checkpoint_dir.empty()) {
    return job.submission.checkpoint_dir;
  }
  const std::string root =
      options_.checkpoint_root.empty() ? options_.data_dir + "/checkpoints" : options_.checkpoint_root;
  return root + "/" + std::to_string(job.row.id);
}

TaskLaunch Controller::MakeLaunch(const Job& job, int task) const {
  const JobRecord& rec = Rec(job);
  const Allocation& a = rec.allocations[static_cast<size_t>(task)];
  const NodeSpec& node = state_->spec(a.node);
  const GpuModel* model = nullptr;
  TaskLaunch l;
  l.key = TaskKey{job.row.id, task, job.row.attempts};
  l.job_name = job.row.name;
  l.command = job.submission.command;
  l.env = job.submission.env;
  l.cpu_milli = a.cpu.value();
  l.memory_mib = a.memory.value();
  l.working_dir = job.submission.working_dir;
  l.submit_dir = job.submission.submit_dir;
  l.checkpoint_dir = CheckpointDir(job);
  l.checkpoint_managed = job.submission.checkpoint_dir.empty();
  if (std::optional<std::pair<int64_t, int64_t>> id = KnownIdentity(job.row.tenant)) {
    l.uid = id->first;
    l.gid = id->second;
  }
  std::set<int> numa;
  for (const GpuGrant& g : a.gpus) {
    const GpuSpec& gpu = node.gpus[static_cast<size_t>(g.gpu)];
    model = &catalog_->Get(gpu.model);
    numa.insert(gpu.numa_node);
    if (g.is_mig()) {
      l.mig.push_back(MigRequest{g.gpu, model->mig_profiles[static_cast<size_t>(g.mig_profile)].name,
                                 g.mig_start});
    } else {
      l.gpus.push_back(g.gpu);
    }
    l.gpu_milli = g.milli.value();
    l.gpu_memory_mib = g.memory.value();
  }
  l.numa_nodes.assign(numa.begin(), numa.end());

  // The gang's rendezvous, as torchrun sets it: one process per task.
  const int world = static_cast<int>(rec.allocations.size());
  std::vector<std::string> node_order;
  int local_rank = 0;
  for (int t = 0; t < world; ++t) {
    const std::string& n = job.tasks[static_cast<size_t>(t)].node;
    if (std::find(node_order.begin(), node_order.end(), n) == node_order.end()) {
      node_order.push_back(n);
    }
    if (t < task && n == job.tasks[static_cast<size_t>(task)].node) {
      ++local_rank;
    }
  }
  const std::string& mine = job.tasks[static_cast<size_t>(task)].node;
  const int node_rank = static_cast<int>(
      std::find(node_order.begin(), node_order.end(), mine) - node_order.begin());
  auto master = nodes_.find(job.tasks[0].node);
  l.env["MASTER_ADDR"] = master != nodes_.end() && !master->second.address.empty()
                             ? master->second.address
                             : "127.0.0.1";
  l.env["MASTER_PORT"] = std::to_string(20000 + job.row.id % 20000);
  l.env["WORLD_SIZE"] = std::to_string(world);
  l.env["RANK"] = std::to_string(task);
  l.env["LOCAL_RANK"] = std::to_string(local_rank);
  l.env["NODE_RANK"] = std::to_string(node_rank);
  l.env["LOCAL_WORLD_SIZE"] = std::to_string(
      std::count_if(job.tasks.begin(), job.tasks.end(), [&](const TaskRun& r) { return r.node == mine; }));
  l.env["TESSERA_JOB_ID"] = std::to_string(job.row.id);
  l.env["TESSERA_JOB_NAME"] = job.row.name;
  l.env["TESSERA_TASK_INDEX"] = std::to_string(task);
  l.env["TESSERA_ATTEMPT"] = std::to_string(job.row.attempts);
  l.env["TESSERA_TENANT"] = job.row.tenant;
  l.env["TESSERA_QUEUE"] = job.row.queue;
  l.env["TESSERA_CHECKPOINT_DIR"] = l.checkpoint_dir;
  if (a.gpus.size() == 1 && !a.gpus[0].is_mig() && a.gpus[0].milli.value() < kWholeGpu.value()) {
    // A software share: MPS enforces the compute share and the memory cap.
    l.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] =
        std::to_string(std::max<int64_t>(1, a.gpus[0].milli.value() / 10));
    if (a.gpus[0].memory.value() > 0) {
      l.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = "0=" + std::to_string(a.gpus[0].memory.value()) + "M";
    }
  }
  return l;
}

void Controller::StartJob(Job& job, const StartDecision& d, Micros now, Pending& out) {
  const uint64_t id = job.row.id;
  const JobRecord& rec = Rec(job);  // the lifecycle made it running
  job.after = AfterStop::kNone;
  job.checkpointed = false;
  job.tasks.assign(rec.allocations.size(), TaskRun{});
  for (size_t t = 0; t < rec.allocations.size(); ++t) {
    job.tasks[t].node = state_->spec(rec.allocations[t].node).name;
  }
  job.row.state = "running";
  if (job.row.start_us == 0) {
    job.row.start_us = now;
  }
  ++job.row.attempts;
  job.row.reason = d.backfilled ? "backfilled" : "";
  out.dirty.insert(id);
  ++decisions_["start"];
  (void)IdentityFor(job.row.tenant, out);  // made durable with the start
  for (size_t t = 0; t < rec.allocations.size(); ++t) {
    out.launches.emplace_back(job.tasks[t].node, MakeLaunch(job, static_cast<int>(t)));
  }
}

void Controller::StopJob(Job& job, AfterStop after, Micros grace, Micros now, Pending& out) {
  JobRecord& rec = Rec(job);
  if (rec.phase != JobPhase::kRunning && rec.phase != JobPhase::kStopping) {
    return;
  }
  // A cancel or a failure outranks a requeue already under way.
  if (job.after == AfterStop::kNone || after == AfterStop::kCancel ||
      (after == AfterStop::kFail && job.after == AfterStop::kRequeue)) {
    job.after = after;
  }
  lifecycle_->Stopping(rec);
  job.row.state = "stopping";
  out.dirty.insert(job.row.id);
  bool alive = false;
  for (size_t t = 0; t < job.tasks.size(); ++t) {
    if (!job.tasks[t].exited) {
      alive = true;
      out.stops.emplace_back(job.tasks[t].node,
                             TaskStop{TaskKey{job.row.id, static_cast<int>(t), job.row.attempts},
                                      grace / 1000, 15});
    }
  }
  if (!alive) {
    Finalize(job, now, out);
  }
}

void Controller::TaskExited(Job& job, int task, int exit_code, int signal, Micros now,
                            Pending& out) {
  TaskRun& run = job.tasks[static_cast<size_t>(task)];
  if (run.exited) {
    return;
  }
  run.exited = true;
  run.exit_code = exit_code;
  run.signal = signal;
  out.dirty.insert(job.row.id);
  bool alive = false;
  for (const TaskRun& r : job.tasks) {
    alive = alive || !r.exited;
  }
  if (job.after == AfterStop::kNone && (exit_code != 0 || signal != 0)) {
    job.row.reason = "task " + std::to_string(task) +
                     (signal != 0 ? " was killed by signal " + std::to_string(signal)
                                  : " exited with code " + std::to_string(exit_code));
    job.row.exit_code = exit_code != 0 ? exit_code : 128 + signal;
    if (alive) {
      StopJob(job, AfterStop::kFail, 0, now, out);
      return;
    }
    job.after = AfterStop::kFail;
  }
  if (!alive) {
    Finalize(job, now, out);
  }
}

void Controller::Finalize(Job& job, Micros now, Pending& out) {
  const uint64_t id = job.row.id;
  JobRecord& rec = Rec(job);
  if (rec.run_start > 0 && now > rec.run_start) {
    out.batch.usage.push_back(
        UsageRow{id, job.row.tenant, job.row.queue, rec.run_start, now, rec.gpu_milli});
    tenant_gpu_seconds_[job.row.tenant] +=
        static_cast<double>(rec.gpu_milli) / 1000.0 * static_cast<double>(now - rec.run_start) / 1e6;
  }
  job.row.placement_json.clear();
  out.dirty.insert(id);

  bool failed = false;
  for (const TaskRun& r : job.tasks) {
    failed = failed || r.exit_code != 0 || r.signal != 0;
  }
  // A preempted job whose tasks all exited 0 without reporting a checkpoint ran to its
  // end within its grace period: it is done, not stopped early (README, "Preemption
  // protocol"). A checkpoint report, a signal or a non-zero code means resume it.
  if (job.after == AfterStop::kRequeue && job.cause == RequeueCause::kPreempted && !failed &&
      !job.checkpointed && !job.tasks.empty()) {
    job.after = AfterStop::kNone;
    job.row.reason.clear();
  }
  JobEnd end = JobEnd::kSucceeded;
  switch (job.after) {
    case AfterStop::kRequeue: {
      lifecycle_->Requeue(rec, job.checkpointed ? job.checkpoint_progress : 0, job.cause, now);
      job.row.progress_us = rec.resumed_from;
      job.row.state = "pending";
      job.tasks.clear();
      job.after = AfterStop::kNone;
      ++decisions_["requeue"];
      return;
    }
    case AfterStop::kCancel:
      job.row.state = "cancelled";
      end = JobEnd::kCancelled;
      break;
    case AfterStop::kFail:
      job.row.state = "failed";
      end = JobEnd::kFailed;
      break;
    case AfterStop::kNone:
      job.row.state = failed ? "failed" : "succeeded";
      end = failed ? JobEnd::kFailed : JobEnd::kSucceeded;
      if (!failed) {
        job.row.exit_code = 0;
        job.row.reason.clear();
      }
      break;
  }
  lifecycle_->Finish(rec, end, now);
  out.finished.push_back(id);
  job.row.end_us = now;
  ++finished_[{job.row.queue, job.row.state}];
}

void Controller::NodeDown(NodeInfo& node, const std::string& reason, Micros now, Pending& out) {
  node.up = false;
  node.reason = reason;
  node.launches.clear();
  node.stops.clear();
  rebuild_ = true;
  const std::string name = node.inventory.spec.name;
  std::cerr << "tessera server: node " << name << " is down: " << reason << "\n";
  for (auto& [id, job] : jobs_) {
    const JobPhase phase = Rec(job).phase;
    if (phase != JobPhase::kRunning && phase != JobPhase::kStopping) {
      continue;
    }
    bool touched = false;
    for (const TaskRun& r : job.tasks) {
      touched = touched || (r.node == name && !r.exited);
    }
    if (!touched) {
      continue;
    }
    if (job.after == AfterStop::kNone) {
      job.after = AfterStop::kRequeue;
      job.cause = RequeueCause::kNodeLost;
      job.row.reason = "requeued: node " + name + " was lost (" + reason + ")";
    }
    for (size_t t = 0; t < job.tasks.size(); ++t) {
      if (job.tasks[t].node == name && !job.tasks[t].exited) {
        job.tasks[t].exited = true;
        job.tasks[t].signal = 9;
        lifecycle_->DetachTask(Rec(job), t);
      }
    }
    // The rest of the gang stops at once: it restarts as a whole.
    StopJob(job, job.after, 0, now, out);
  }
}

Status Controller::RunCycle() {
  const auto started = std::chrono::steady_clock::now();
  Pending out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Micros now = clock_->NowMicros();
    for (auto& [name, node] : nodes_) {
      const bool silent = now - node.last_seen > options_.node_timeout;
      if (silent && (node.up || node.reason.rfind("waiting", 0) == 0)) {
        NodeDown(node, "no heartbeat for " + std::to_string(options_.node_timeout / 1'000'000) + " s",
                 now, out);
      }
    }
    if (rebuild_) {
      Status s = RebuildScheduler();
      if (!s.ok()) {
        return s;
      }
    }
    for (const auto& [node, key] : std::exchange(relaunch_, {})) {
      Job* job = FindJob(key.job);
      auto n = nodes_.find(node);
      if (job == nullptr || n == nodes_.end() || !n->second.up || job->row.attempts != key.attempt ||
          Rec(*job).phase != JobPhase::kRunning ||
          static_cast<size_t>(key.task) >= job->tasks.size() ||
          job->tasks[static_cast<size_t>(key.task)].exited ||
          job->tasks[static_cast<size_t>(key.task)].node != node) {
        continue;
      }
      out.launches.emplace_back(node, MakeLaunch(*job, key.task));
    }
    if (state_->node_count() > 0 && scheduler_->pending() > 0) {
      CycleResult result = lifecycle_->RunCycle(now, rng_);
      reservation_ = result.reservation;
      for (const StartDecision& d : result.starts) {
        StartJob(JobAt(d.job), d, now, out);
      }
      for (const PreemptDecision& d : result.preemptions) {
        Job& victim = JobAt(d.victim);
        ++victim.row.preemptions;
        victim.cause = RequeueCause::kPreempted;
        victim.row.reason = "preempted by job " + std::to_string(slot_job_[d.preemptor.value()]);
        ++decisions_["preempt"];
        ++preemptions_[victim.row.queue];
        StopJob(victim, AfterStop::kRequeue, std::max<Micros>(0, d.evict_at - now), now, out);
      }
      std::vector<std::string> broken = lifecycle_->CheckInvariants();
      if (!broken.empty()) {
        ++invariant_breaches_;
        std::cerr << "tessera server: invariant broken after the cycle: " << broken.front() << "\n";
      }
    }
    SaveHistory(now, out);
    Seal(out);
  }
  Status published = Publish(std::move(out));
  // Wall time, not the injected clock: this measures the controller itself.
  cycle_seconds_.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  ++cycles_;
  return published;
}

std::vector<std::string> Controller::CheckInvariants() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rebuild_ ? std::vector<std::string>{} : lifecycle_->CheckInvariants();
}

Status Controller::Publish(Pending out) {
  if (!out.batch.empty()) {
    Status s = store_->Commit(std::move(out.batch));
    if (!s.ok()) {
      store_failed_ = true;
      return UnavailableError("state store: " + s.message());
    }
  }
  if (options_.on_started) {
    const Micros now = clock_->NowMicros();
    for (const auto& [node, launch] : out.launches) {
      if (launch.key.task == 0) {
        options_.on_started(launch.key.job, now);
      }
    }
  }
  if (out.launches.empty() && out.stops.empty() && out.finished.empty()) {
    return Status::Ok();
  }
  std::lock_guard<std::mutex> lock(mu_);
  // Their terminal rows are durable now: they may leave memory.
  finished_order_.insert(finished_order_.end(), out.finished.begin(), out.finished.end());
  Archive(clock_->NowMicros());
  for (auto& [node, launch] : out.launches) {
    auto n = nodes_.find(node);
    Job* job = FindJob(launch.key.job);
    if (n == nodes_.end() || job == nullptr || job->row.attempts != launch.key.attempt ||
        Rec(*job).phase != JobPhase::kRunning) {
      continue;
    }
    n->second.launches.push_back(std::move(launch));
  }
  for (auto& [node, stop] : out.stops) {
    auto n = nodes_.find(node);
    if (n == nodes_.end()) {
      continue;
    }
    auto& stops = n->second.stops;
    if (std::none_of(stops.begin(), stops.end(),
                     [&](const TaskStop& s) { return s.key == stop.key; })) {
      stops.push_back(stop);
    }
  }
  return Status::Ok();
}

// ---- views -------------------------------------------------------------------

nlohmann::json Controller::JobJson(const Job& job, bool with_spec) const {
  const JobRow& row = job.row;
  JobRecord archived;  // an archived job holds nothing and predicts nothing
  if (job.slot == kArchived) {
    archived.gpu_milli = job.submission.spec.TotalGpuMilli(*catalog_);
  }
  const JobRecord& rec = job.slot == kArchived ? archived : Rec(job);
  nlohmann::json tasks = nlohmann::json::array();
  for (size_t t = 0; t < job.submission.spec.tasks.size(); ++t) {
    nlohmann::json task = {{"index", t}, {"node", nullptr}, {"gpus", nlohmann::json::array()},
                           {"state", "pending"}, {"exit_code", nullptr}};
    if (t < job.tasks.size()) {
      const TaskRun& run = job.tasks[t];
      task["node"] = run.node;
      task["state"] = run.exited ? "exited" : "running";
      if (run.exited) {
        task["exit_code"] = run.exit_code;
      }
      auto node = nodes_.find(run.node);
      if (t < rec.allocations.size() && node != nodes_.end()) {
        const NodeInventory& inv = node->second.inventory;
        for (const GpuGrant& g : rec.allocations[t].gpus) {
          const size_t gi = static_cast<size_t>(g.gpu);
          nlohmann::json gpu = {{"index", g.gpu}, {"milli", g.milli.value()}, {"mig_profile", nullptr}};
          if (gi < inv.spec.gpus.size()) {
            const GpuModel& model = catalog_->Get(inv.spec.gpus[gi].model);
            gpu["model"] = model.name;
            if (g.is_mig()) {
              gpu["mig_profile"] = model.mig_profiles[static_cast<size_t>(g.mig_profile)].name;
            }
          }
          if (gi < inv.gpu_uuids.size()) {
            gpu["uuid"] = inv.gpu_uuids[gi];
          }
          task["gpus"].push_back(std::move(gpu));
        }
      }
    }
    tasks.push_back(std::move(task));
  }
  const bool ended = Terminal(row.state);
  std::string reason = row.reason;
  if (row.state == "pending") {
    // Why it was requeued, if it was, then why it waits now.
    const bool requeued = reason.rfind("requeued", 0) == 0 || reason.rfind("preempted", 0) == 0;
    reason = requeued ? reason + "; " + PendingReason(job) : PendingReason(job);
  }
  nlohmann::json out = {
      {"id", row.id},
      {"name", row.name},
      {"tenant", row.tenant},
      {"queue", row.queue},
      {"state", row.state},
      {"priority", job.submission.spec.priority},
      {"submit_time", TimeOrNull(row.submit_us)},
      {"start_time", TimeOrNull(row.start_us)},
      {"end_time", TimeOrNull(row.end_us)},
      {"attempts", row.attempts},
      {"preemptions", row.preemptions},
      // Saved progress the next attempt resumes from (its checkpoint), in seconds.
      {"progress_seconds", static_cast<double>(row.progress_us) / 1e6},
      // The runtime backfill and ordering expect (learned from finished jobs); null: none.
      {"predicted_seconds", rec.predicted_runtime > 0
                                ? nlohmann::json(static_cast<double>(rec.predicted_runtime) / 1e6)
                                : nlohmann::json(nullptr)},
      {"exit_code",
       ended && row.state != "cancelled" ? nlohmann::json(row.exit_code) : nlohmann::json(nullptr)},
      {"reason", reason},
      {"gpus", job.submission.spec.TotalGpus()},
      {"gpu_milli", rec.gpu_milli},
      {"replicas", job.submission.spec.tasks.size()},
      {"checkpoint_dir", CheckpointDir(job)},
      {"run_as", RunAsJson(KnownIdentity(row.tenant))},
      {"tasks", std::move(tasks)}};
  if (with_spec) {
    // Parsed once per job: the spec never changes.
    if (job.spec_view == nullptr) {
      nlohmann::json parsed = nlohmann::json::parse(row.spec_json, nullptr, false);
      job.spec_view = std::make_shared<const nlohmann::json>(
          parsed.is_discarded() ? nlohmann::json(nullptr) : std::move(parsed));
    }
    out["spec"] = *job.spec_view;
  }
  return out;
}

nlohmann::json Controller::Nodes() {
  std::lock_guard<std::mutex> lock(mu_);
  return {{"nodes", NodesJson("")}};
}

std::map<std::pair<std::string, int>, std::vector<Controller::GrantHolder>> Controller::GpuHolders()
    const {
  std::map<std::pair<std::string, int>, std::vector<GrantHolder>> holders;
  for (const auto& [id, job] : jobs_) {
    const JobRecord& rec = Rec(job);
    if (rec.phase != JobPhase::kRunning && rec.phase != JobPhase::kStopping) {
      continue;
    }
    for (size_t t = 0; t < rec.allocations.size() && t < job.tasks.size(); ++t) {
      if (job.tasks[t].exited) {
        continue;
      }
      for (const GpuGrant& g : rec.allocations[t].gpus) {
        holders[{job.tasks[t].node, g.gpu}].push_back(GrantHolder{id, &job, &g});
      }
    }
  }
  return holders;
}

nlohmann::json Controller::NodesJson(const std::string& only, const Principal* viewer) const {
  const auto holders = GpuHolders();
  std::map<std::string, std::pair<int64_t, int64_t>> used;  // cpu, memory
  for (const auto& [id, job] : jobs_) {
    const JobRecord& rec = Rec(job);
    if (rec.phase != JobPhase::kRunning && rec.phase != JobPhase::kStopping) {
      continue;
    }
    for (size_t t = 0; t < rec.allocations.size() && t < job.tasks.size(); ++t) {
      if (job.tasks[t].exited || (!only.empty() && job.tasks[t].node != only)) {
        continue;
      }
      const Allocation& a = rec.allocations[t];
      auto& u = used[job.tasks[t].node];
      u.first += a.cpu.value();
      u.second += a.memory.value();
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, node] : nodes_) {
    if (!only.empty() && name != only) {
      continue;
    }
    const NodeSpec& spec = node.inventory.spec;
    nlohmann::json gpus = nlohmann::json::array();
    for (size_t g = 0; g < spec.gpus.size(); ++g) {
      const GpuModel& model = catalog_->Get(spec.gpus[g].model);
      const GpuTelemetry* sample = g < node.telemetry.size() ? &node.telemetry[g] : nullptr;
      int64_t milli = 0;
      nlohmann::json hs = nlohmann::json::array();
      auto h = holders.find({name, static_cast<int>(g)});
      if (h != holders.end()) {
        for (const GrantHolder& x : h->second) {
          const GpuGrant& grant = *x.grant;
          milli += grant.milli.value();
          nlohmann::json profile = nullptr;
          std::string mig_uuid;
          if (grant.is_mig()) {
            profile = model.mig_profiles[static_cast<size_t>(grant.mig_profile)].name;
            for (size_t i = 0; sample != nullptr && i < sample->mig.size(); ++i) {
              if (sample->mig[i].start == grant.mig_start) {
                mig_uuid = sample->mig[i].uuid;
              }
            }
          }
          // Another tenant's job: who holds the GPU (for capacity planning), not what.
          const bool hidden = viewer != nullptr && viewer->role != Role::kAdmin &&
                              !(viewer->role == Role::kTenant && viewer->tenant == x.info->row.tenant);
          hs.push_back({{"job", hidden ? nlohmann::json(nullptr) : nlohmann::json(x.job)},
                        {"job_name", hidden ? "(another tenant's job)" : x.info->row.name},
                        {"tenant", x.info->row.tenant},
                        {"queue", x.info->row.queue},
                        {"milli", grant.milli.value()},
                        {"memory_mib", grant.memory.value()},
                        {"mig_profile", std::move(profile)},
                        {"mig_start", grant.is_mig() ? nlohmann::json(grant.mig_start)
                                                     : nlohmann::json(nullptr)},
                        {"mig_uuid", mig_uuid}});
        }
      }
      auto drain = node.gpu_drains.find(static_cast<int>(g));
      const bool drained = drain != node.gpu_drains.end();
      const bool lost = (sample != nullptr && sample->lost) ||
                        (drained && drain->second.kind == HealthKindName(HealthKind::kLost));
      nlohmann::json telemetry = nullptr;
      if (sample != nullptr && node.up) {
        nlohmann::json mig = nlohmann::json::array();
        for (const MigTelemetry& m : sample->mig) {
          mig.push_back({{"uuid", m.uuid}, {"profile", m.profile}, {"start", m.start},
                         {"gi_id", m.gi_id}, {"fb_used_mib", m.fb_used_mib},
                         {"fb_free_mib", m.fb_free_mib}});
        }
        telemetry = {{"util_pct", sample->util_pct},
                     {"fb_used_mib", sample->fb_used_mib},
                     {"fb_free_mib", sample->fb_free_mib},
                     {"temp_c", sample->temp_c},
                     {"power_w", static_cast<double>(sample->power_mw) / 1000.0},
                     {"sm_clock_mhz", sample->sm_clock_mhz},
                     {"last_xid", sample->last_xid},
                     {"xid_count", sample->xid_count},
                     {"ecc_sbe_volatile", sample->ecc_sbe_volatile},
                     {"ecc_dbe_volatile", sample->ecc_dbe_volatile},
                     {"lost", sample->lost},
                     {"at", TimeOrNull(node.telemetry_at)},
                     {"mig", std::move(mig)}};
      }
      gpus.push_back({{"index", g},
                      {"uuid", g < node.inventory.gpu_uuids.size() ? node.inventory.gpu_uuids[g] : ""},
                      {"model", model.name},
                      {"memory_mib", model.memory.value()},
                      {"mode", SharingModeName(spec.gpus[g].mode)},
                      {"used_milli", milli},
                      {"health", lost ? "lost" : drained ? "drained" : "ok"},
                      {"drain", drained ? DrainJson(drain->second) : DrainJson(std::nullopt)},
                      {"holders", std::move(hs)},
                      {"telemetry", std::move(telemetry)}});
    }
    auto u = used.find(name);
    out.push_back({{"name", name},
                   {"state", node.up ? "up" : "down"},
                   {"reason", node.reason},
                   {"schedulable", node.up && !node.drain.has_value()},
                   {"drain", DrainJson(node.drain)},
                   {"address", node.address},
                   {"last_heartbeat", TimeOrNull(node.last_seen)},
                   {"cpu_milli", spec.cpu.value()},
                   {"cpu_used_milli", u != used.end() ? u->second.first : 0},
                   {"memory_mib", spec.memory.value()},
                   {"memory_used_mib", u != used.end() ? u->second.second : 0},
                   {"gpus", std::move(gpus)}});
  }
  return out;
}

nlohmann::json Controller::Queues() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::pair<int64_t, int64_t>> counts;  // pending, running
  for (const auto& [id, job] : jobs_) {
    if (!job.durable) {
      continue;
    }
    const JobPhase phase = Rec(job).phase;
    if (phase == JobPhase::kPending) {
      ++counts[job.row.queue].first;
    } else if (phase != JobPhase::kFinished) {
      ++counts[job.row.queue].second;
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < tree_->size(); ++i) {
    const QueueId q(i);
    const QueueNodeSpec& spec = tree_->spec(q);
    nlohmann::json resources = nlohmann::json::array();
    for (size_t r = 0; r < tree_->resources().size(); ++r) {
      const Quota& quota = tree_->quota(q, r);
      auto opt = [](const std::optional<int64_t>& v) {
        return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
      };
      resources.push_back({{"resource", ResourceNameString(tree_->resources()[r], *catalog_)},
                           {"nominal", quota.nominal},
                           {"borrowing_limit", opt(quota.borrowing_limit)},
                           {"lending_limit", opt(quota.lending_limit)},
                           {"used", quota_ != nullptr && !rebuild_ ? quota_->Usage(q, r) : 0}});
    }
    const QueueId parent = tree_->parent(q);
    auto c = counts.find(spec.name);
    out.push_back({{"name", spec.name},
                   {"kind", tree_->is_queue(q) ? "queue" : "cohort"},
                   {"parent", parent.valid() ? nlohmann::json(tree_->spec(parent).name)
                                             : nlohmann::json(nullptr)},
                   {"tenant", tree_->is_queue(q) ? nlohmann::json(tree_->tenant(q))
                                                 : nlohmann::json(nullptr)},
                   {"weight", spec.weight},
                   {"fair_share", FairShareJson(q)},
                   {"pending", c != counts.end() ? c->second.first : 0},
                   {"running", c != counts.end() ? c->second.second : 0},
                   {"resources", std::move(resources)}});
  }
  return {{"queues", std::move(out)}};
}

std::vector<std::string> Controller::Tenants() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (QueueId q : tree_->queues()) {
    const std::string& t = tree_->tenant(q);
    if (std::find(out.begin(), out.end(), t) == out.end()) {
      out.push_back(t);
    }
  }
  return out;
}

Status Controller::SetQueues(const std::string& yaml) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<QueueTree> old = std::move(tree_);
  const std::string old_yaml = queues_yaml_;
  Status s = ApplyQueueYaml(yaml);
  if (s.ok()) {
    for (const auto& [id, job] : jobs_) {
      if (job.durable && Rec(job).phase != JobPhase::kFinished &&
          !tree_->FindQueue(job.row.queue).ok()) {
        s = FailedPreconditionError("queue '" + job.row.queue + "' has unfinished jobs (job " +
                                    std::to_string(id) + ")");
        break;
      }
    }
  }
  if (s.ok()) {
    WriteBatch b;
    b.kv.emplace_back(kQueuesKey, yaml);
    s = store_->Commit(std::move(b));
  }
  if (!s.ok()) {
    tree_ = std::move(old);
    queues_yaml_ = old_yaml;
    rebuild_ = true;
    return s;
  }
  // Everything that pointed into the old tree is rebuilt against the new one.
  CarryUsage(clock_->NowMicros());
  lifecycle_->Bind(nullptr, nullptr, nullptr);
  lifecycle_->set_tree(tree_.get());
  scheduler_.reset();
  quota_.reset();
  rebuild_ = true;
  return Status::Ok();
}

void Controller::AppendRunningUsage(Micros since, Micros until, std::vector<UsageRow>* rows) const {
  const Micros now = clock_->NowMicros();
  for (const auto& [id, job] : jobs_) {
    const JobRecord& rec = Rec(job);
    if ((rec.phase == JobPhase::kRunning || rec.phase == JobPhase::kStopping) &&
        rec.run_start < until && now > since) {
      rows->push_back(UsageRow{id, job.row.tenant, job.row.queue, rec.run_start, now, rec.gpu_milli});
    }
  }
}

StatusOr<nlohmann::json> Controller::Usage(Micros since, Micros until, const std::string& by,
                                           const std::string& tenant) {
  if (by != "tenant" && by != "queue" && by != "job") {
    return InvalidArgumentError("by must be tenant, queue or job, got '" + by + "'");
  }
  if (until <= since) {
    return InvalidArgumentError("until must be after since");
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<UsageRow> rows, store_->LoadUsage(since, until));
  {
    std::lock_guard<std::mutex> lock(mu_);
    AppendRunningUsage(since, until, &rows);
  }
  std::map<std::string, std::pair<double, std::set<uint64_t>>> groups;
  for (const UsageRow& r : rows) {
    const Micros begin = std::max(r.start_us, since);
    const Micros end = std::min(r.end_us, until);
    if (end <= begin || (!tenant.empty() && r.tenant != tenant)) {
      continue;
    }
    const std::string key = by == "tenant" ? r.tenant : by == "queue" ? r.queue : std::to_string(r.job);
    auto& g = groups[key];
    g.first += static_cast<double>(r.gpu_milli) / 1000.0 * static_cast<double>(end - begin) / 3.6e9;
    g.second.insert(r.job);
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, g] : groups) {
    out.push_back({{"key", key}, {"gpu_hours", g.first}, {"jobs", g.second.size()}});
  }
  return nlohmann::json{{"since", FormatRfc3339(since)},
                        {"until", FormatRfc3339(until)},
                        {"by", by},
                        {"rows", std::move(out)}};
}

}  // namespace tessera
