// The what-if comparison: the replay under the recorded policy and under another, beside
// what happened, per tenant and queue (whatif.h).
#include "sim/whatif.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <utility>

#include "api/queue_config.h"
#include "base/strings.h"

namespace tessera {
namespace {

using json = nlohmann::json;

// Each group's figures on one side; `tenant_of`/`queue_of` are per job index.
// `alone`: the side's static-vc reference (null: no quotas).
void AddSide(const JobRun& run, const JobSummary& summary, const JobRun* alone,
             const std::vector<std::string>& tenant_of, const std::vector<std::string>& queue_of,
             std::vector<WhatIfGroup>* groups) {
  struct Acc {
    int64_t jobs = 0, started = 0;
    double jct = 0, wait = 0, busy = 0;
    double rho_jct = 0, rho_alone = 0;  // over jobs that finished alone
  };
  std::map<std::pair<std::string, std::string>, Acc> acc;
  for (size_t i = 0; i < run.jobs.size(); ++i) {
    const JobOutcome& o = run.jobs[i];
    for (const auto& key : {std::pair<std::string, std::string>{"all", ""},
                            std::pair<std::string, std::string>{"tenant", tenant_of[i]},
                            std::pair<std::string, std::string>{"queue", queue_of[i]}}) {
      Acc& a = acc[key];
      a.busy += static_cast<double>(o.gpus) * static_cast<double>(o.service) / 1e6;
      if (o.first_start >= 0) {
        ++a.started;
        a.wait += static_cast<double>(o.first_start - o.submit) / 1e6;
      }
      if (o.finish >= 0) {
        ++a.jobs;
        a.jct += static_cast<double>(o.finish - o.submit) / 1e6;
      }
      if (alone != nullptr && alone->jobs[i].finish >= 0) {
        const JobOutcome& ref = alone->jobs[i];
        // A job the side never finished counts as infinitely late.
        a.rho_jct += o.finish >= 0 ? static_cast<double>(o.finish - o.submit) / 1e6
                                   : std::numeric_limits<double>::infinity();
        a.rho_alone += static_cast<double>(ref.finish - ref.submit) / 1e6;
      }
    }
  }
  const double capacity = static_cast<double>(run.cluster_gpus) * summary.makespan_s;
  for (WhatIfGroup& g : *groups) {
    WhatIfFigures f;
    auto it = acc.find({g.kind, g.name});
    if (it != acc.end()) {
      const Acc& a = it->second;
      f.jobs = a.jobs;
      f.avg_jct_s = a.jobs > 0 ? a.jct / static_cast<double>(a.jobs) : 0;
      f.avg_wait_s = a.started > 0 ? a.wait / static_cast<double>(a.started) : 0;
      f.utilization = capacity > 0 ? a.busy / capacity : 0;
      f.rho = a.rho_alone > 0 ? a.rho_jct / a.rho_alone : -1;
    }
    g.sides.push_back(f);
  }
}

// Seconds under 2 minutes, minutes under 2 hours, else hours.
std::string Duration(double seconds) {
  char buf[32];
  if (seconds < 120) {
    std::snprintf(buf, sizeof(buf), "%.0fs", seconds);
  } else if (seconds < 7200) {
    std::snprintf(buf, sizeof(buf), "%.1fm", seconds / 60.0);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2fh", seconds / 3600.0);
  }
  return buf;
}

}  // namespace

StatusOr<WhatIfReport> RunWhatIf(const RecordedHistory& history, const WhatIfOptions& options,
                                 const GpuCatalog& catalog) {
  StatusOr<QueueTreeSpec> cluster_queues = ParseQueueTreeText(history.queues_yaml, catalog);
  if (!cluster_queues.ok()) {
    return InvalidArgumentError("the cluster's queue configuration: " +
                                cluster_queues.status().message());
  }
  TESSERA_ASSIGN_OR_RETURN(QueueTree tree, QueueTree::Create(*cluster_queues, catalog));
  TESSERA_ASSIGN_OR_RETURN(SchedulerPolicy recorded, RecordedSchedulerPolicy(history.policy));
  const std::string other_spec = options.policy.empty() ? history.policy.name : options.policy;
  TESSERA_ASSIGN_OR_RETURN(SchedulerPolicy other,
                           options.policy.empty()
                               ? RecordedSchedulerPolicy(history.policy)
                               : PolicyUnderRecordedBounds(options.policy, history.policy));
  const QueueTreeSpec& other_queues = options.queues ? *options.queues : *cluster_queues;
  if (options.queues) {
    TESSERA_ASSIGN_OR_RETURN(QueueTree other_tree, QueueTree::Create(*options.queues, catalog));
    // The replay's jobs must have their queues in the other tree too.
    for (const RecordedJob& job : history.jobs) {
      if (ActualWork(job, history.policy.restart_overhead) >= 0 &&
          !other_tree.FindQueue(job.spec.queue).ok()) {
        return InvalidArgumentError("--queues: queue '" + job.spec.queue + "' of job " +
                                    std::to_string(job.id) + " is not in the file");
      }
    }
  }
  TESSERA_ASSIGN_OR_RETURN(Replay replay, BuildReplay(history, tree));

  JobSimOptions base;
  base.placement = history.policy.placement;
  base.seed = history.policy.seed;
  base.record_usage = false;
  JobSimOptions same = base;
  same.policy = recorded;
  JobSimOptions alt = base;
  alt.policy = other;
  TESSERA_ASSIGN_OR_RETURN(JobSimResult same_run,
                           RunJobSimulation(replay.nodes, *cluster_queues, replay.jobs, same, catalog));
  TESSERA_ASSIGN_OR_RETURN(JobSimResult alt_run,
                           RunJobSimulation(replay.nodes, other_queues, replay.jobs, alt, catalog));

  WhatIfReport report;
  report.since = history.since;
  report.until = history.until;
  report.replayed = static_cast<int64_t>(replay.jobs.size());
  report.never_ran = replay.never_ran;
  report.not_ended = replay.not_ended;
  report.nodes = static_cast<int64_t>(replay.nodes.size());
  report.gpus = replay.actual.cluster_gpus;
  std::string other_label = other_spec;
  if (options.queues) {
    other_label += options.policy.empty() ? " (replayed, --queues)" : " (--queues)";
  }
  report.sides = {"actual", history.policy.name + " (replayed)", other_label};

  std::vector<std::string> tenant_of, queue_of;
  std::map<std::string, bool> tenants, queues;
  for (const RecordedJob& job : history.jobs) {
    if (ActualWork(job, history.policy.restart_overhead) >= 0) {
      tenant_of.push_back(job.tenant);
      queue_of.push_back(job.spec.queue);
      tenants[job.tenant] = true;
      queues[job.spec.queue] = true;
    }
  }
  report.groups.push_back(WhatIfGroup{"all", "", {}});
  for (const auto& [t, unused] : tenants) {
    report.groups.push_back(WhatIfGroup{"tenant", t, {}});
  }
  // Queues apart from tenants only when they differ (a tenant with several queues, or a
  // queue not named after its tenant).
  bool queues_differ = queues.size() != tenants.size();
  for (size_t i = 0; i < tenant_of.size(); ++i) {
    queues_differ = queues_differ || tenant_of[i] != queue_of[i];
  }
  for (const auto& [q, unused] : queues) {
    if (queues_differ) {
      report.groups.push_back(WhatIfGroup{"queue", q, {}});
    }
  }
  same_run.run.policy = report.sides[1];
  alt_run.run.policy = report.sides[2];
  // Finish-time fairness against static-vc (each tenant alone on its quota), where the
  // side's queues give tenants quotas.
  auto has_quotas = [](const JobRun& run) {
    for (int64_t q : run.tenant_quota_milli) {
      if (q > 0) {
        return true;
      }
    }
    return false;
  };
  TESSERA_ASSIGN_OR_RETURN(SchedulerPolicy static_vc,
                           PolicyUnderRecordedBounds("static-vc", history.policy));
  JobSimOptions alone = base;
  alone.policy = static_vc;
  std::optional<JobSimResult> cluster_alone, other_alone;
  if (has_quotas(same_run.run)) {
    TESSERA_ASSIGN_OR_RETURN(cluster_alone, RunJobSimulation(replay.nodes, *cluster_queues,
                                                             replay.jobs, alone, catalog));
  }
  if (!options.queues) {
    other_alone = cluster_alone;
  } else if (has_quotas(alt_run.run)) {
    TESSERA_ASSIGN_OR_RETURN(other_alone, RunJobSimulation(replay.nodes, other_queues,
                                                           replay.jobs, alone, catalog));
  }
  report.quotas = cluster_alone.has_value() || other_alone.has_value();
  const JobRun* refs[3] = {cluster_alone ? &cluster_alone->run : nullptr,
                           cluster_alone ? &cluster_alone->run : nullptr,
                           other_alone ? &other_alone->run : nullptr};
  const JobRun* runs[3] = {&replay.actual, &same_run.run, &alt_run.run};
  for (int i = 0; i < 3; ++i) {
    JobSummary s = Summarize(*runs[i]);
    AddSide(*runs[i], s, refs[i], tenant_of, queue_of, &report.groups);
    report.summaries.push_back(std::move(s));
  }
  report.summaries[0].policy = "actual";
  return report;
}

std::string WhatIfText(const WhatIfReport& report) {
  std::ostringstream out;
  out << "What-if over " << report.replayed << " jobs on " << report.nodes << " nodes ("
      << report.gpus << " GPUs)";
  if (report.never_ran + report.not_ended > 0) {
    out << "; left out: " << report.never_ran << " that never ran, " << report.not_ended
        << " not ended";
  }
  out << "\n";
  for (size_t s = 0; s < report.sides.size(); ++s) {
    out << "  [" << s + 1 << "] " << report.sides[s] << "\n";
  }
  // Group, then per side: jobs, avg JCT, avg wait, GPU utilisation.
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"GROUP"};
  for (size_t s = 0; s < report.sides.size(); ++s) {
    const std::string n = "[" + std::to_string(s + 1) + "]";
    for (const char* col : {"JOBS", "AVG JCT", "AVG WAIT", "UTIL", "RHO"}) {
      if (std::string(col) != "RHO" || report.quotas) {
        header.push_back(std::string(col) + " " + n);
      }
    }
  }
  rows.push_back(header);
  for (const WhatIfGroup& g : report.groups) {
    std::vector<std::string> row = {g.kind == "all" ? std::string("all") : g.kind + " " + g.name};
    for (const WhatIfFigures& f : g.sides) {
      row.push_back(std::to_string(f.jobs));
      row.push_back(Duration(f.avg_jct_s));
      row.push_back(Duration(f.avg_wait_s));
      row.push_back(FixedDecimal(100 * f.utilization, 1) + "%");
      if (report.quotas) {
        row.push_back(f.rho < 0 ? std::string("-") : FixedDecimal(f.rho, 2));
      }
    }
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) {
        line += std::string(width[c] - row[c].size() + 2, ' ');
      }
    }
    out << line << "\n";
  }
  if (report.quotas) {
    out << "RHO: JCT against static-vc's (each tenant alone on its quota); above 1 is worse\n";
  }
  out << "fairness (Jain over tenants), makespan, preemptions:";
  for (size_t s = 0; s < report.summaries.size(); ++s) {
    const JobSummary& m = report.summaries[s];
    out << "  [" << s + 1 << "] " << FixedDecimal(m.jain, 3) << " " << Duration(m.makespan_s) << " "
        << m.preemptions;
  }
  out << "\n";
  return out.str();
}

json WhatIfJson(const WhatIfReport& report) {
  json sides = json::array();
  for (size_t s = 0; s < report.sides.size(); ++s) {
    const JobSummary& m = report.summaries[s];
    sides.push_back({{"label", report.sides[s]},
                     {"jobs", m.jobs},
                     {"unfinished", m.unfinished},
                     {"avg_jct_s", m.avg_jct_s},
                     {"avg_wait_s", m.avg_wait_s},
                     {"p95_jct_s", m.p95_jct_s},
                     {"makespan_s", m.makespan_s},
                     {"utilization", m.utilization},
                     {"jain", m.jain},
                     {"preemptions", m.preemptions},
                     {"lost_gpu_hours", m.lost_gpu_hours}});
  }
  json groups = json::array();
  for (const WhatIfGroup& g : report.groups) {
    json per = json::array();
    for (const WhatIfFigures& f : g.sides) {
      per.push_back({{"jobs", f.jobs},
                     {"avg_jct_s", f.avg_jct_s},
                     {"avg_wait_s", f.avg_wait_s},
                     {"utilization", f.utilization},
                     {"rho", f.rho < 0 ? json(nullptr) : json(f.rho)}});
    }
    groups.push_back({{"kind", g.kind}, {"name", g.name}, {"sides", std::move(per)}});
  }
  return {{"since_us", report.since},       {"until_us", report.until},
          {"replayed", report.replayed},    {"never_ran", report.never_ran},
          {"not_ended", report.not_ended},  {"nodes", report.nodes},
          {"gpus", report.gpus},            {"quotas", report.quotas},
          {"sides", std::move(sides)},
          {"groups", std::move(groups)}};
}

}  // namespace tessera
