// What the cluster commands print: job, node, GPU and queue tables and a job's details,
// from the controller's JSON (declared in cluster_views.h).
#include "cli/cluster_views.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "api/units.h"
#include "base/strings.h"
#include "base/time_format.h"
#include "cli/attempt_views.h"
#include "cli/eta_views.h"
#include "cli/json_read.h"
#include "cli/table.h"

namespace tessera {

using nlohmann::json;
using json_read::Array;
using json_read::AsInt;
using json_read::Field;
using json_read::Int;
using json_read::OptInt;
using json_read::Str;
using json_read::Time;

std::string ScalarText(const json& v) {
  if (v.is_string()) {
    return v.get<std::string>();
  }
  if (v.is_null()) {
    return "-";
  }
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool IsTerminal(std::string_view state) {
  return state == "succeeded" || state == "failed" || state == "cancelled";
}
namespace {

std::string AgeSince(std::optional<Micros> t, Micros now) {
  return t.has_value() ? FormatAge(now - *t) : "-";
}

std::string TimeWithAge(std::optional<Micros> t, Micros now) {
  if (!t.has_value()) {
    return "-";
  }
  return FormatRfc3339(*t) + " (" + FormatAge(now - *t) + " ago)";
}

// GPUs of a job: whole cards as a count, shares as a decimal ("0.5").
std::string JobGpus(const json& job) {
  const int64_t gpus = Int(job, "gpus");
  const int64_t milli = Int(job, "gpu_milli");
  if (milli > 0 && milli != gpus * 1000) {
    return FormatMilli(milli);
  }
  return std::to_string(gpus);
}

// Distinct nodes of a job's tasks, in task order.
std::string JobNodes(const json& job) {
  std::vector<std::string> nodes;
  for (const json& task : Array(job, "tasks")) {
    const std::string node = Str(task, "node");
    if (!node.empty() && std::find(nodes.begin(), nodes.end(), node) == nodes.end()) {
      nodes.push_back(node);
    }
  }
  return nodes.empty() ? "-" : Join(nodes, ",");
}

// The current attempt's (a requeued job's clock starts again; cli/attempt_views.h).
std::string RunTime(const json& job, Micros now) { return AttemptRunTime(job, now); }

std::string OptIntText(const json& j, const char* key) {
  std::optional<int64_t> v = OptInt(j, key);
  return v.has_value() ? std::to_string(*v) : "-";
}

std::string ShellQuote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?;&|<>(){}[]#~!") == std::string::npos) {
    return arg;
  }
  std::string out = "'";
  for (char c : arg) {
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return out + "'";
}

// One line for a spec value: scalars as text, arrays of scalars space-separated (a
// command shell-quoted), objects as k=v pairs.
std::string SpecValue(const std::string& key, const json& v) {
  if (v.is_array()) {
    std::vector<std::string> parts;
    for (const json& item : v) {
      const std::string text = item.is_primitive() ? ScalarText(item) : item.dump();
      parts.push_back(key == "command" || key == "args" ? ShellQuote(text) : text);
    }
    return Join(parts, key == "command" || key == "args" ? " " : ", ");
  }
  if (v.is_object()) {
    std::vector<std::string> parts;
    for (auto it = v.begin(); it != v.end(); ++it) {
      const json& item = it.value();
      parts.push_back(it.key() + "=" +
                      (item.is_primitive()
                           ? ScalarText(item)
                           : item.dump(-1, ' ', false, json::error_handler_t::replace)));
    }
    return Join(parts, " ");
  }
  return ScalarText(v);
}

// "0,1 (H100-80GB)", "2(3g.40gb) (A100-40GB)", "0(0.5)".
std::string TaskGpus(const json& task) {
  std::vector<std::string> cells;
  std::vector<std::string> models;
  for (const json& gpu : Array(task, "gpus")) {
    std::string cell = OptIntText(gpu, "index");
    const std::string mig = Str(gpu, "mig_profile");
    const int64_t milli = OptInt(gpu, "milli").value_or(1000);
    if (!mig.empty()) {
      cell += "(" + mig + ")";
    } else if (milli != 1000) {
      cell += "(" + FormatMilli(milli) + ")";
    }
    cells.push_back(cell);
    const std::string model = Str(gpu, "model");
    if (!model.empty() && std::find(models.begin(), models.end(), model) == models.end()) {
      models.push_back(model);
    }
  }
  if (cells.empty()) {
    return "-";
  }
  std::string out = Join(cells, ",");
  if (!models.empty()) {
    out += " " + Join(models, ",");
  }
  return out;
}

// ---------------------------------------------------------------------------------
// GPU map cells.

constexpr size_t kCellWidth = 10;

std::string BarCell(int64_t used_milli) {
  const int64_t used = std::clamp<int64_t>(used_milli, 0, 1000);
  int64_t filled = (used + 50) / 100;
  if (used > 0 && filled == 0) {
    filled = 1;
  }
  if (used < 1000 && filled == 10) {
    filled = 9;
  }
  return "[" + std::string(static_cast<size_t>(filled), '#') +
         std::string(kCellWidth - static_cast<size_t>(filled), '.') + "]";
}

// "3g.40gb" -> "3g".
std::string ShortProfile(const std::string& profile) {
  const size_t dot = profile.find('.');
  return dot == std::string::npos ? profile : profile.substr(0, dot);
}

std::string MigCell(const json& gpu) {
  std::vector<std::pair<std::string, int>> counts;
  for (const json& holder : Array(gpu, "holders")) {
    std::string p = ShortProfile(Str(holder, "mig_profile"));
    if (p.empty()) {
      p = "?";
    }
    auto it =
        std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == p; });
    if (it == counts.end()) {
      counts.emplace_back(p, 1);
    } else {
      ++it->second;
    }
  }
  std::vector<std::string> parts;
  for (const auto& [profile, n] : counts) {
    parts.push_back(n > 1 ? profile + "x" + std::to_string(n) : profile);
  }
  std::string inner = "m:" + Join(parts, ",");
  if (inner.size() > kCellWidth) {
    inner = inner.substr(0, kCellWidth - 1) + "+";
  }
  inner.append(kCellWidth - inner.size(), '.');
  return "[" + inner + "]";
}

}  // namespace

// ---------------------------------------------------------------------------------
// Rendering.

std::string JobsTable(const json& jobs, bool wide, Micros now) {
  std::vector<std::string> headers = {"ID",   "NAME", "TENANT", "QUEUE", "STATE",
                                      "GPUS", "AGE",  "NODES",  "REASON"};
  if (wide) {
    headers = {"ID",  "NAME",    "TENANT",   "QUEUE",       "STATE", "PRIO",  "GPUS",  "REPLICAS",
               "AGE", "RUNTIME", "ATTEMPTS", "PREEMPTIONS", "EXIT",  "NODES", "REASON"};
  }
  // A USER column after TENANT once a listed job names its user.
  const bool users = std::any_of(jobs.begin(), jobs.end(),
                                 [](const json& job) { return !Str(job, "user").empty(); });
  if (users) {
    headers.insert(headers.begin() + 3, "USER");
  }
  Table table(headers);
  table.SetRightAligned(0);
  if (!wide) {
    table.SetMaxWidth(1, 24);
    table.SetMaxWidth(users ? 8 : 7, 24);
    table.SetMaxWidth(users ? 9 : 8, 48);
  }
  for (const json& job : jobs) {
    const std::string age = AgeSince(Time(job, "submit_time"), now);
    // An array's element ("12_3") or its folded pending elements (job_actions.h).
    const std::string id = Field(job, "display_id") != nullptr ? Str(job, "display_id")
                                                               : OptIntText(job, "id");
    // A job flagged by its queue's idle policy says so in its state.
    std::string state = Str(job, "state");
    if (const json* idle = Field(job, "idle_since"); idle != nullptr && idle->is_string()) {
      const json* hung = Field(job, "hung");
      state += hung != nullptr && hung->is_boolean() && hung->get<bool>() ? " (hung)" : " (idle)";
    }
    std::vector<std::string> row;
    if (wide) {
      row = {id, Str(job, "name"), Str(job, "tenant"), Str(job, "queue"),
             state, OptIntText(job, "priority"), JobGpus(job),
             OptIntText(job, "replicas"), age, RunTime(job, now),
             OptIntText(job, "attempts"), OptIntText(job, "preemptions"),
             OptIntText(job, "exit_code"), JobNodes(job), Str(job, "reason")};
    } else {
      row = {id, Str(job, "name"), Str(job, "tenant"), Str(job, "queue"),
             state, JobGpus(job), age, JobNodes(job), Str(job, "reason")};
    }
    if (users) {
      row.insert(row.begin() + 3, Str(job, "user"));
    }
    table.AddRow(row);
  }
  return table.Render();
}

std::string JobDetails(const json& job, Micros now) {
  std::ostringstream out;
  const std::string state = Str(job, "state");
  out << "Job " << OptIntText(job, "id");
  if (const std::string name = Str(job, "name"); !name.empty()) {
    out << ": " << name;
  }
  out << "\n";
  Table fields({"", ""});
  auto row = [&](const std::string& label, const std::string& value) {
    fields.AddRow({"  " + label + ":", value});
  };
  row("State", state.empty() ? "-" : state);
  if (const std::string reason = Str(job, "reason"); !reason.empty()) {
    row(state == "pending" ? "Why pending" : "Reason", reason);
  }
  if (state == "pending") {  // the controller's start forecast (eta_views.h)
    row("ETA", EtaText(job, now));
    row("Position", OptIntText(job, "position") + " (in its queue: " +
                        OptIntText(job, "queue_position") + ")");
    row("Blocked by", BlockingText(job));
  }
  row("Tenant", Str(job, "tenant"));
  row("Queue", Str(job, "queue"));
  row("Priority", OptIntText(job, "priority"));
  row("Submitted", TimeWithAge(Time(job, "submit_time"), now));
  row("Started", TimeWithAge(Time(job, "start_time"), now));
  row("Ended", TimeWithAge(Time(job, "end_time"), now));
  row("Run time", RunTimeWithTotal(job, now));
  if (const json* w = Field(job, "utilisation_window"); w != nullptr && w->is_object()) {
    // The controller's idle watch (docs/gpu-sharing.md, "Idle and hung jobs").
    auto pct = [&](const char* key) {
      const json* v = Field(*w, key);
      return v != nullptr && v->is_number() ? FormatFixed(v->get<double>(), 1) + "%" : std::string("-");
    };
    row("GPU utilisation", pct("mean_pct") + " over the last " + Str(*w, "window") +
                               " (this attempt: " + pct("attempt_mean_pct") + ")");
    if (const json* idle = Field(job, "idle_since"); idle != nullptr && idle->is_string()) {
      const json* hung = Field(job, "hung");
      const bool is_hung = hung != nullptr && hung->is_boolean() && hung->get<bool>();
      row(is_hung ? "Hung" : "Idle",
          "since " + TimeWithAge(Time(job, "idle_since"), now) +
              (is_hung ? " (idle GPUs and no output since " +
                             TimeWithAge(Time(*w, "last_output_time"), now) + ")"
                       : ""));
    }
  }
  row("Attempts", OptIntText(job, "attempts"));
  row("Preemptions", OptIntText(job, "preemptions"));
  row("Exit code", OptIntText(job, "exit_code"));
  row("Replicas", OptIntText(job, "replicas"));
  {
    // Whole cards read as a count; shares as the GPU-equivalents and the cards touched.
    const int64_t touched = Int(job, "gpus");
    const std::string gpus = JobGpus(job);
    row("GPUs", gpus == std::to_string(touched) ? gpus
                                                : gpus + " (on " + std::to_string(touched) +
                                                      (touched == 1 ? " GPU)" : " GPUs)"));
  }
  if (const std::string dir = Str(job, "checkpoint_dir"); !dir.empty()) {
    row("Checkpoints", dir);
  }
  // The header row of `fields` is blank: drop it.
  std::string rendered = fields.Render();
  rendered.erase(0, rendered.find('\n') + 1);
  out << rendered;

  const json* spec = Field(job, "spec");
  if (spec != nullptr && spec->is_object() && !spec->empty()) {
    out << "Spec:\n";
    Table spec_table({"", ""});
    for (auto it = spec->begin(); it != spec->end(); ++it) {
      spec_table.AddRow({"  " + it.key() + ":", SpecValue(it.key(), it.value())});
    }
    rendered = spec_table.Render();
    rendered.erase(0, rendered.find('\n') + 1);
    out << rendered;
  }

  const json& tasks = Array(job, "tasks");
  if (!tasks.empty()) {
    out << "Tasks:\n";
    Table table({"  TASK", "NODE", "STATE", "EXIT", "GPUS"});
    for (const json& task : tasks) {
      const std::string node = Str(task, "node");
      table.AddRow({"  " + OptIntText(task, "index"), node.empty() ? "-" : node, Str(task, "state"),
                    OptIntText(task, "exit_code"), TaskGpus(task)});
    }
    out << table.Render();
  }
  out << AttemptsTable(job, now);
  return out.str();
}

std::string NodesTable(const json& nodes, Micros now) {
  Table table(
      {"NAME", "STATE", "GPUS", "MODEL", "CPU", "MEMORY", "HEARTBEAT", "LABELS", "REASON"});
  for (const json& node : nodes) {
    const json& gpus = Array(node, "gpus");
    int64_t used = 0;
    std::vector<std::string> models;
    for (const json& gpu : gpus) {
      used += Int(gpu, "used_milli");
      const std::string model = Str(gpu, "model");
      if (!model.empty() && std::find(models.begin(), models.end(), model) == models.end()) {
        models.push_back(model);
      }
    }
    std::string labels;  // "block=b1,rack=r1", by key
    if (const json& l = node.value("labels", json()); l.is_object()) {
      for (const auto& [key, value] : l.items()) {
        labels += (labels.empty() ? "" : ",") + key + "=" +
                  (value.is_string() ? value.get<std::string>() : "");
      }
    }
    std::string state = Str(node, "state");
    std::string reason = Str(node, "reason");
    if (const json& drain = node.value("drain", json()); drain.is_object()) {
      state += ",drained";
      reason = "drained by " + Str(drain, "by") + ": " + Str(drain, "reason") +
               (reason.empty() ? "" : "; " + reason);
    }
    table.AddRow(
        {Str(node, "name"), state,
         FormatMilli(used) + "/" + std::to_string(gpus.size()),
         models.empty() ? "-" : Join(models, ","),
         FormatMilli(Int(node, "cpu_used_milli")) + "/" + FormatMilli(Int(node, "cpu_milli")),
         FormatMiBShort(Int(node, "memory_used_mib")) + "/" +
             FormatMiBShort(Int(node, "memory_mib")),
         AgeSince(Time(node, "last_heartbeat"), now), labels.empty() ? "-" : labels, reason});
  }
  std::string out = table.Render();
  // GPUs taken in turn, said plainly: their shares are not isolated.
  for (const json& node : nodes) {
    for (const json& gpu : Array(node, "gpus")) {
      if (Str(gpu, "mode") == "timeslice") {
        out += Str(node, "name") + " GPU " + std::to_string(Int(gpu, "index")) + " timeslice, " +
               std::to_string(Int(gpu, "replicas")) +
               " replicas: no memory or fault isolation between its shares\n";
      }
    }
  }
  // GPUs out of service, each with why.
  for (const json& node : nodes) {
    for (const json& gpu : Array(node, "gpus")) {
      const json& drain = gpu.value("drain", json());
      if (!drain.is_object()) {
        continue;
      }
      out += Str(node, "name") + " GPU " + std::to_string(Int(gpu, "index")) + " " +
             (Str(gpu, "health") == "lost" ? "lost" : "drained") + " by " + Str(drain, "by") + " " +
             AgeSince(Time(drain, "since"), now) + " ago: " + Str(drain, "reason") + "\n";
    }
  }
  return out;
}

std::string GpuMap(const json& nodes) {
  std::ostringstream out;
  out << "GPU map: [###.......] tenths of a GPU in use, [m:3g,1g...] MIG instances; "
         "then the jobs holding it\n";
  size_t name_width = 0;
  for (const json& node : nodes) {
    name_width = std::max(name_width, DisplayWidth(Str(node, "name")));
  }
  std::map<int64_t, std::string> tenants;  // job -> tenant
  for (const json& node : nodes) {
    const std::string name = Str(node, "name");
    std::string line = name + std::string(name_width - DisplayWidth(name), ' ');
    const json& gpus = Array(node, "gpus");
    if (gpus.empty()) {
      line += "  (no GPUs)";
    }
    for (const json& gpu : gpus) {
      line += "  ";
      line += Str(gpu, "mode") == "mig" ? MigCell(gpu) : BarCell(Int(gpu, "used_milli"));
      if (gpu.value("drain", json()).is_object()) {
        line += "(drained)";
      }
      std::vector<std::string> holders;
      for (const json& holder : Array(gpu, "holders")) {
        std::optional<int64_t> job = OptInt(holder, "job");
        if (!job.has_value()) {
          continue;
        }
        const std::string id = std::to_string(*job);
        if (std::find(holders.begin(), holders.end(), id) == holders.end()) {
          holders.push_back(id);
        }
        tenants[*job] = Str(holder, "tenant");
      }
      line += Join(holders, ",");
    }
    if (const std::string state = Str(node, "state"); !state.empty() && state != "up") {
      line += "  (" + state + ")";
    }
    out << line << "\n";
  }
  if (!tenants.empty()) {
    std::vector<std::string> parts;
    for (const auto& [job, tenant] : tenants) {
      parts.push_back(std::to_string(job) + "=" + (tenant.empty() ? "?" : tenant));
    }
    out << "jobs: " << Join(parts, " ") << "\n";
  }
  return out.str();
}

namespace {

// A queue quantity in the unit people read: GPUs and cores from milli, memory in MiB.
std::string QuantityText(const std::string& resource, const json& v) {
  if (v.is_null()) {
    return "-";
  }
  if (!v.is_number()) {
    return ScalarText(v);
  }
  const int64_t q = AsInt(v).value_or(0);
  if (resource == "gpu" || StartsWith(resource, "gpu:") || resource == "cpu") {
    return FormatMilli(q);
  }
  if (resource == "memory" || resource == "gpu-memory") {
    return FormatMiBShort(q);
  }
  return std::to_string(q);
}

}  // namespace

std::string QueuesTable(const json& queues) {
  Table table({"NAME", "PARENT", "TENANT", "WEIGHT", "PENDING", "RUNNING", "RESOURCE", "NOMINAL",
               "USED", "BORROWING-LIMIT", "LENDING-LIMIT"});
  for (const json& queue : queues) {
    std::vector<std::string> head = {
        Str(queue, "name"),
        Str(queue, "parent"),
        Str(queue, "tenant"),
        Field(queue, "weight") != nullptr ? ScalarText(*Field(queue, "weight")) : "-",
        OptIntText(queue, "pending"),
        OptIntText(queue, "running")};
    const json& resources = Array(queue, "resources");
    if (resources.empty()) {
      head.insert(head.end(), {"-", "-", "-", "-", "-"});
      table.AddRow(head);
      continue;
    }
    bool first = true;
    for (const json& r : resources) {
      const std::string resource = Str(r, "resource");
      auto q = [&](const char* key) {
        const json* v = Field(r, key);
        return v == nullptr ? std::string("-") : QuantityText(resource, *v);
      };
      std::vector<std::string> row =
          first ? head : std::vector<std::string>(head.size(), std::string());
      row.insert(row.end(),
                 {resource, q("nominal"), q("used"), q("borrowing_limit"), q("lending_limit")});
      table.AddRow(std::move(row));
      first = false;
    }
  }
  std::string text = table.Render();
  // Each queue's idle policy (api/queue_idle.h), from controllers that report them.
  Table idle({"QUEUE", "IDLE POLICY"});
  bool any = false;
  for (const json& queue : queues) {
    if (const json* policy = Field(queue, "idle"); policy != nullptr && policy->is_object()) {
      idle.AddRow({Str(queue, "name"), Str(*policy, "text")});
      any = true;
    }
  }
  return any ? text + "\n" + idle.Render() : text;
}

namespace {

// A usage row's number; none when absent (older controllers) or null.
std::optional<double> UsageNumber(const json& row, const char* key) {
  const json* v = Field(row, key);
  return v != nullptr && v->is_number() ? std::optional<double>(v->get<double>()) : std::nullopt;
}

// Controllers that measure utilisation send "efficiency" (used / measured GPU-hours).
bool HasEfficiency(const json& rows) {
  for (const json& row : rows) {
    if (Field(row, "efficiency") != nullptr) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string UsageCsv(const json& body, const std::string& by) {
  const json& rows = Array(body, "rows");
  const bool efficiency = HasEfficiency(rows);
  std::ostringstream out;
  out << by << ",gpu_hours,jobs" << (efficiency ? ",used_gpu_hours,efficiency" : "") << "\n";
  for (const json& row : rows) {
    const json* key = Field(row, "key");
    const json* h = Field(row, "gpu_hours");
    out << CsvField(key != nullptr ? ScalarText(*key) : "") << ","
        << (h != nullptr && h->is_number() ? h->dump() : "0") << "," << Int(row, "jobs");
    if (efficiency) {
      const json* used = Field(row, "used_gpu_hours");
      const json* e = Field(row, "efficiency");
      out << "," << (used != nullptr && used->is_number() ? used->dump() : "0") << ","
          << (e != nullptr && e->is_number() ? e->dump() : "");
    }
    out << "\n";
  }
  return out.str();
}

std::string UsageTable(const json& body, const std::string& by, const std::string& since,
                       const std::string& until) {
  const json& rows = Array(body, "rows");
  const bool efficiency = HasEfficiency(rows);
  std::ostringstream out;
  const std::string from = Str(body, "since").empty() ? since : Str(body, "since");
  const std::string to = Str(body, "until").empty() ? until : Str(body, "until");
  out << "GPU usage from " << from << " to " << to << " by " << by << "\n";
  std::string key_header = by;
  std::transform(key_header.begin(), key_header.end(), key_header.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  std::vector<std::string> headers = {key_header, "GPU-HOURS", "JOBS"};
  if (efficiency) {
    headers.insert(headers.end(), {"USED-GPU-HOURS", "EFFICIENCY"});
  }
  Table table(headers);
  for (size_t c = 1; c < headers.size(); ++c) {
    table.SetRightAligned(c);
  }
  double total_hours = 0;
  int64_t total_jobs = 0;
  double total_used = 0;
  double total_measured = 0;  // allocated GPU-hours of the measured rows
  auto percent = [](std::optional<double> e) {
    return e ? FormatFixed(*e * 100, 1) + "%" : std::string("-");
  };
  for (const json& row : rows) {
    const json* key = Field(row, "key");
    const double hours = UsageNumber(row, "gpu_hours").value_or(0);
    total_hours += hours;
    total_jobs += Int(row, "jobs");
    std::vector<std::string> cells = {key != nullptr ? ScalarText(*key) : "-",
                                      FormatFixed(hours, 2), std::to_string(Int(row, "jobs"))};
    if (efficiency) {
      const double used = UsageNumber(row, "used_gpu_hours").value_or(0);
      const std::optional<double> e = UsageNumber(row, "efficiency");
      if (e) {
        total_used += used;
        total_measured += UsageNumber(row, "measured_gpu_hours").value_or(0);
      }
      cells.insert(cells.end(), {FormatFixed(used, 2), percent(e)});
    }
    table.AddRow(std::move(cells));
  }
  std::vector<std::string> total = {"TOTAL", FormatFixed(total_hours, 2), std::to_string(total_jobs)};
  if (efficiency) {
    total.insert(total.end(),
                 {FormatFixed(total_used, 2),
                  percent(total_measured > 0 ? std::optional<double>(total_used / total_measured)
                                             : std::nullopt)});
  }
  table.AddRow(std::move(total));
  out << table.Render();
  return out.str();
}

}  // namespace tessera
