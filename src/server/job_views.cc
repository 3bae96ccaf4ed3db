#include "server/job_views.h"

#include <algorithm>
#include <mutex>
#include <nlohmann/json.hpp>

#include "base/time_format.h"

namespace tessera {

PendingDemand DemandOf(JobNumber id, const std::string& queue, const JobSpec& spec,
                       const GpuCatalog& catalog) {
  PendingDemand d;
  d.job = id;
  d.queue = queue;
  d.tasks = spec.tasks;
  d.gpu_milli = spec.TotalGpuMilli(catalog);
  d.gpus = spec.TotalGpus();
  for (const TaskRequest& t : spec.tasks) {
    d.cpu += t.cpu.value();
    d.memory += t.memory.value();
    d.gpu_memory += t.gpu_memory.value() * t.gpu_count;
  }
  return d;
}

namespace {

// A task no node that is up could hold even when empty: waiting will not help.
std::string NeverFits(const TaskRequest& t, const NodeCapacity& capacity,
                      const GpuCatalog& catalog) {
  if (t.cpu.value() > capacity.cpu) {
    return "never fits: a task asks " + std::to_string(t.cpu.value() / 1000) +
           " CPUs, the largest node has " + std::to_string(capacity.cpu / 1000);
  }
  if (t.memory.value() > capacity.memory) {
    return "never fits: a task asks " + std::to_string(t.memory.value()) +
           " MiB of memory, the largest node has " + std::to_string(capacity.memory);
  }
  if (t.gpu_count == 0) {
    return "";
  }
  int best = 0;
  for (const auto& [key, count] : capacity.gpus) {
    const GpuModelId model(key.first);
    const auto mode = static_cast<SharingMode>(key.second);
    if (!t.models.empty() && !t.models.Contains(model)) {
      continue;
    }
    const bool ok = t.wants_mig() ? mode == SharingMode::kMig &&
                                        catalog.Get(model).FindMigProfile(t.mig_profile).has_value()
                    : t.fractional() ? mode == SharingMode::kShared
                                     : mode != SharingMode::kMig;
    if (ok) {
      best = std::max(best, count);
    }
  }
  if (best >= t.gpu_count) {
    return "";
  }
  std::string what = t.wants_mig()    ? "a GPU in MIG mode with profile " + t.mig_profile
                     : t.fractional() ? std::string("a GPU in shared mode")
                                      : std::to_string(t.gpu_count) + " GPUs on one node";
  if (!t.models.empty()) {
    what += " of the models asked for";
  }
  return "never fits: no node that is up has " + what;
}

bool OverQuota(const PendingDemand& job, const WaitContext& c) {
  if (c.quota == nullptr || c.tree == nullptr || c.resources == 0) {
    return false;
  }
  StatusOr<QueueId> q = c.tree->FindQueue(job.queue);
  if (!q.ok()) {
    return false;
  }
  ResourceVector charge(c.resources, 0);
  auto add = [&charge](int index, int64_t v) {
    if (index >= 0 && static_cast<size_t>(index) < charge.size()) {
      charge[static_cast<size_t>(index)] += v;
    }
  };
  add(c.any_gpu, job.gpu_milli);
  add(c.cpu, job.cpu);
  add(c.memory, job.memory);
  add(c.gpu_memory, job.gpu_memory);
  return c.quota->Check(q.value(), charge) == QuotaFit::kNo;
}

}  // namespace

std::string PendingReasonOf(const PendingDemand& job, const WaitContext& c,
                            const GpuCatalog& catalog) {
  if (!c.built) {
    return "waiting for the next scheduling cycle";
  }
  if (c.nodes_up == 0) {
    return "no node is up";
  }
  for (const TaskRequest& t : job.tasks) {
    if (std::string never = NeverFits(t, c.capacity, catalog); !never.empty()) {
      return never;
    }
  }
  if (c.reserved_job.valid() && c.reserved_job == job.job) {
    return "next to start: resources are reserved for it (expected " +
           FormatRfc3339(c.reserved_start) + ")";
  }
  if (OverQuota(job, c)) {
    return "waiting for quota: queue " + job.queue +
           " and its cohort have no unused quota for it now";
  }
  return "waiting for resources (" + std::to_string(job.gpus) +
         " GPUs); jobs ahead of it or running hold them";
}

void PublishedJobs::Put(std::shared_ptr<const JobView> view) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_[view->id] = std::move(view);
}

void PublishedJobs::Erase(JobNumber id) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.erase(id);
}

void PublishedJobs::SetContext(std::shared_ptr<const WaitContext> context) {
  std::lock_guard<std::mutex> lock(mu_);
  context_ = std::move(context);
}

std::shared_ptr<const JobView> PublishedJobs::Get(JobNumber id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second;
}

std::shared_ptr<const WaitContext> PublishedJobs::context() const {
  std::lock_guard<std::mutex> lock(mu_);
  return context_;
}

std::string PublishedJobs::ReasonOf(const JobView& view) const {
  if (!view.pending) {
    return view.reason;
  }
  const std::string why = PendingReasonOf(view.demand, *context(), *catalog_);
  return view.reason.empty() ? why : view.reason + "; " + why;
}

void PublishedJobs::SetEtas(std::shared_ptr<const EtaTable> etas) {
  std::lock_guard<std::mutex> lock(mu_);
  etas_ = std::move(etas);
}

std::shared_ptr<const EtaTable> PublishedJobs::etas() const {
  std::lock_guard<std::mutex> lock(mu_);
  return etas_;
}

std::string PublishedJobs::Text(const JobView& view) const {
  std::string text = view.body;
  text += ",\"reason\":";
  text +=
      nlohmann::json(ReasonOf(view)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (view.pending) {
    text += EtaFieldsJson(etas().get(), view.id);  // as of the last ETA refresh
  }
  text += '}';
  return text;
}

PublishedJobs::Page PublishedJobs::List(const Principal& who, const JobFilter& filter,
                                        JobNumber after, size_t limit) const {
  // Newest first, in steps of a bounded number of jobs per hold of the lock, resuming
  // below the last job seen: a filter that skips many jobs does not hold up publishing.
  constexpr size_t kStep = 256;
  Page page;
  JobNumber below = after;  // 0: from the newest
  bool done = false;
  while (!done) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = below.value() == 0 ? jobs_.end() : jobs_.lower_bound(below);
    for (size_t steps = 0;; ++steps) {
      if (it == jobs_.begin()) {
        done = true;
        break;
      }
      if (steps == kStep) {
        break;  // resume below `below` with the lock taken again
      }
      --it;
      below = it->first;
      const JobView& job = *it->second;
      if (!Visible(who, job.tenant) ||
          (!filter.states.empty() && std::find(filter.states.begin(), filter.states.end(),
                                               job.state) == filter.states.end()) ||
          (!filter.queue.empty() && job.queue != filter.queue) ||
          (!filter.tenant.empty() && job.tenant != filter.tenant)) {
        continue;
      }
      if (page.jobs.size() == limit) {
        page.more = true;
        done = true;
        break;
      }
      page.jobs.push_back(it->second);
    }
  }
  return page;
}

}  // namespace tessera
