#include "cli/eta_views.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "cli/json_read.h"
#include "cli/table.h"

namespace tessera {

using nlohmann::json;
using json_read::Int;
using json_read::OptInt;
using json_read::Str;
using json_read::Time;

namespace {

std::string IntText(const json& j, const char* key) {
  const std::optional<int64_t> v = OptInt(j, key);
  return v ? std::to_string(*v) : "-";
}

std::string GpusOf(const json& job) {
  const int64_t gpus = Int(job, "gpus");
  const int64_t milli = Int(job, "gpu_milli");
  return milli > 0 && milli != gpus * 1000 ? FormatMilli(milli) : std::to_string(gpus);
}

}  // namespace

std::string EtaText(const json& job, Micros now) {
  if (const std::optional<Micros> eta = Time(job, "eta"); eta) {
    return Str(job, "eta") + (*eta > now ? " (in " + FormatAge(*eta - now) + ")" : " (now)");
  }
  const std::string note = Str(job, "eta_note");
  return note.empty() ? "-" : note;
}

std::string BlockingText(const json& job) {
  auto it = job.find("blocking");
  if (it == job.end() || !it->is_object()) {
    return "-";
  }
  const json& b = *it;
  const std::string kind = Str(b, "kind");
  if (kind == "gpus") {
    const std::string model = Str(b, "model");
    return model.empty() ? "GPUs" : "GPUs (" + model + ")";
  }
  if (kind == "turn") {
    return "its turn: it fits now, jobs ahead go first";
  }
  if (kind == "quota") {
    return "quota of queue " + Str(b, "queue");
  }
  if (kind == "reservation") {
    return "reservation for job " + IntText(b, "job");
  }
  if (kind == "preemption") {
    return "its preemption victims stopping";
  }
  if (kind == "cpu") {
    return "CPUs or memory";
  }
  if (kind == "gate") {
    return Str(b, "reason");  // held, a dependency, an array's throttle
  }
  if (kind == "none") {
    return "nothing: starts at the next cycle";
  }
  return kind.empty() ? "-" : kind;
}

json ByPosition(const json& jobs) {
  std::vector<const json*> rows;
  for (const json& j : jobs) {
    rows.push_back(&j);
  }
  constexpr int64_t kLast = std::numeric_limits<int64_t>::max();
  std::stable_sort(rows.begin(), rows.end(), [&](const json* a, const json* b) {
    return OptInt(*a, "position").value_or(kLast) < OptInt(*b, "position").value_or(kLast);
  });
  json out = json::array();
  for (const json* j : rows) {
    out.push_back(*j);
  }
  return out;
}

std::string JobsStartTable(const json& jobs, Micros now) {
  const json rows = ByPosition(jobs);
  Table t({"POS", "QPOS", "ID", "NAME", "QUEUE", "GPUS", "ETA", "BLOCKING"});
  t.SetRightAligned(0);
  t.SetRightAligned(1);
  t.SetMaxWidth(3, 24);
  for (const json& j : rows) {
    t.AddRow({IntText(j, "position"), IntText(j, "queue_position"), IntText(j, "id"),
              Str(j, "name"), Str(j, "queue"), GpusOf(j), EtaText(j, now), BlockingText(j)});
  }
  return t.Render();
}

}  // namespace tessera
