#include "base/mutex.h"
#include "server/job_views.h"

#include <algorithm>
#include <mutex>
#include <nlohmann/json.hpp>

#include "server/pending_reasons.h"

namespace tessera {

PendingDemand DemandOf(JobNumber id, const std::string& queue, const JobSpec& spec,
                       const GpuCatalog& catalog) {
  PendingDemand d;
  d.job = id;
  d.queue = queue;
  d.tasks = spec.tasks;
  d.topology = spec.topology;
  d.gpu_milli = spec.TotalGpuMilli(catalog);
  d.gpus = spec.TotalGpus();
  for (const TaskRequest& t : spec.tasks) {
    d.cpu += t.cpu.value();
    d.memory += t.memory.value();
    d.gpu_memory += t.gpu_memory.value() * t.gpu_count;
  }
  return d;
}

void PublishedJobs::Put(std::shared_ptr<const JobView> view) {
  MutexLock lock(mu_);
  if (view->pending) {
    ++pending_by_queue_[view->queue];
  }
  std::shared_ptr<const JobView>& slot = jobs_[view->id];
  if (slot != nullptr) {
    Unpend(*slot);
  } else {
    by_tenant_[view->tenant].insert(view->id);
  }
  slot = std::move(view);
}

void PublishedJobs::Erase(JobNumber id) {
  MutexLock lock(mu_);
  if (auto it = jobs_.find(id); it != jobs_.end()) {
    Unpend(*it->second);
    if (auto t = by_tenant_.find(it->second->tenant); t != by_tenant_.end()) {
      t->second.erase(id);
      if (t->second.empty()) {
        by_tenant_.erase(t);
      }
    }
    jobs_.erase(it);
  }
}

void PublishedJobs::Unpend(const JobView& view) {
  if (!view.pending) {
    return;
  }
  if (auto it = pending_by_queue_.find(view.queue); it != pending_by_queue_.end() && --it->second == 0) {
    pending_by_queue_.erase(it);
  }
}

size_t PublishedJobs::PendingIn(const std::string& queue) const {
  MutexLock lock(mu_);
  auto it = pending_by_queue_.find(queue);
  return it == pending_by_queue_.end() ? 0 : it->second;
}

void PublishedJobs::SetContext(std::shared_ptr<const WaitContext> context) {
  MutexLock lock(mu_);
  context_ = std::move(context);
}

std::shared_ptr<const JobView> PublishedJobs::Get(JobNumber id) const {
  MutexLock lock(mu_);
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second;
}

std::shared_ptr<const WaitContext> PublishedJobs::context() const {
  MutexLock lock(mu_);
  return context_;
}

std::string PublishedJobs::ReasonOf(const JobView& view) const {
  if (!view.pending || view.gated) {
    return view.reason;
  }
  if (view.restart_at > 0) {
    // Held back by its restart policy's backoff: not waiting for resources yet.
    const Micros left = clock_ != nullptr ? view.restart_at - clock_->NowMicros() : 0;
    return view.reason +
           (left > 0 ? " in " + std::to_string((left + 999'999) / 1'000'000) + "s" : " now");
  }
  const std::string why = PendingReasonOf(view.demand, *context(), *catalog_);
  return view.reason.empty() ? why : view.reason + "; " + why;
}

void PublishedJobs::SetEtas(std::shared_ptr<const EtaTable> etas) {
  MutexLock lock(mu_);
  etas_ = std::move(etas);
}

std::shared_ptr<const EtaTable> PublishedJobs::etas() const {
  MutexLock lock(mu_);
  return etas_;
}

std::string PublishedJobs::Text(const JobView& view) const {
  std::string text;
  text.reserve(view.body.size() + view.spec.size() + 256);
  text += view.body;
  text += ",\"spec\":";
  text += view.spec.empty() ? std::string_view("null") : std::string_view(view.spec.str());
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
  // A listing of one tenant (a tenant's own, or the admin's ?tenant=) walks only that
  // tenant's jobs.
  const std::string* only = who.role == Role::kTenant ? &who.tenant
                            : !filter.tenant.empty()   ? &filter.tenant
                                                       : nullptr;
  constexpr size_t kStep = 256;
  Page page;
  JobNumber below = after;  // 0: from the newest
  bool done = false;
  while (!done) {
    MutexLock lock(mu_);
    // The next job below `below`, newest first: of every tenant, or of `only`'s.
    std::set<JobNumber>::const_iterator tenant_it;
    std::map<JobNumber, std::shared_ptr<const JobView>>::const_iterator all_it;
    const std::set<JobNumber>* ids = nullptr;
    if (only != nullptr) {
      auto t = by_tenant_.find(*only);
      if (t == by_tenant_.end()) {
        break;
      }
      ids = &t->second;
      tenant_it = below.value() == 0 ? ids->end() : ids->lower_bound(below);
    } else {
      all_it = below.value() == 0 ? jobs_.end() : jobs_.lower_bound(below);
    }
    for (size_t steps = 0;; ++steps) {
      if (ids != nullptr ? tenant_it == ids->begin() : all_it == jobs_.begin()) {
        done = true;
        break;
      }
      if (steps == kStep) {
        break;  // resume below `below` with the lock taken again
      }
      const std::shared_ptr<const JobView>* view = nullptr;
      if (ids != nullptr) {
        below = *--tenant_it;
        auto found = jobs_.find(below);
        if (found == jobs_.end()) {
          continue;
        }
        view = &found->second;
      } else {
        --all_it;
        below = all_it->first;
        view = &all_it->second;
      }
      const JobView& job = **view;
      if (!Visible(who, job.tenant) ||
          (!filter.states.empty() && std::find(filter.states.begin(), filter.states.end(),
                                               job.state) == filter.states.end()) ||
          (!filter.queue.empty() && job.queue != filter.queue) ||
          (!filter.tenant.empty() && job.tenant != filter.tenant) ||
          (!filter.user.empty() && job.user != filter.user)) {
        continue;
      }
      if (page.jobs.size() == limit) {
        page.more = true;
        done = true;
        break;
      }
      page.jobs.push_back(*view);
    }
  }
  return page;
}

}  // namespace tessera
