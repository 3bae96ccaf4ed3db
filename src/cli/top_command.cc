#include "cli/top_command.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "api/units.h"
#include "base/strings.h"
#include "base/time_format.h"
#include "cli/json_read.h"
#include "cli/table.h"
#include "cli/top_paint.h"

namespace tessera {
namespace {

using namespace top_paint;  // NOLINT(google-build-using-namespace): colours

using nlohmann::json;

// ---------------------------------------------------------------------------------
// Reading the server's JSON without exceptions: a missing key, null or a value of
// another type reads as absent.

using json_read::Array;
using json_read::Bool;
using json_read::Field;
using json_read::Int;
using json_read::OptInt;
using json_read::OptNumber;

// A string field, with control characters (C0, DEL, C1) replaced by '?': names come
// from users and must not drive the terminal.
std::string Str(const json& j, const char* key) {
  const std::string raw = json_read::Str(j, key);
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const auto c = static_cast<unsigned char>(raw[i]);
    if (c < 0x20 || c == 0x7f) {
      out += '?';
    } else if (c == 0xc2 && i + 1 < raw.size() &&
               static_cast<unsigned char>(raw[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(raw[i + 1]) <= 0x9f) {
      out += '?';
      ++i;
    } else {
      out += raw[i];
    }
  }
  return out;
}

// The array itself, or the array under `key` of an answer's body.
const json& ListOf(const json& body, const char* key) {
  static const json kEmpty = json::array();
  if (body.is_array()) {
    return body;
  }
  return body.is_object() ? Array(body, key) : kEmpty;
}

// ---------------------------------------------------------------------------------
// Text.

std::string PadRight(const std::string& text, size_t width) {
  const size_t w = DisplayWidth(text);
  return w >= width ? text : text + std::string(width - w, ' ');
}

std::string PadLeft(const std::string& text, size_t width) {
  const size_t w = DisplayWidth(text);
  return w >= width ? text : std::string(width - w, ' ') + text;
}

// MiB as GiB with one decimal at most: 30822 -> "30.1", 81920 -> "80"; from 100 GiB
// on, whole GiB.
std::string Gib(int64_t mib) {
  if (mib < 0) {
    mib = 0;
  }
  if (mib >= 100 * 1024) {
    return std::to_string((mib + 512) / 1024);
  }
  const int64_t tenths = (mib * 10 + 512) / 1024;
  if (tenths % 10 == 0) {
    return std::to_string(tenths / 10);
  }
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10);
}

// "3g.40gb" -> 40 GiB; "A100-80GB" -> 80 GiB: the number before a trailing "gb".
std::optional<int64_t> GibFromName(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!EndsWith(lower, "gb")) {
    return std::nullopt;
  }
  size_t end = lower.size() - 2;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(lower[begin - 1])) != 0) {
    --begin;
  }
  if (begin == end || end - begin > 6) {
    return std::nullopt;
  }
  StatusOr<int64_t> gib = ParseInt64(lower.substr(begin, end - begin));
  return gib.ok() ? std::optional<int64_t>(*gib * 1024) : std::nullopt;
}

int64_t BarFill(int64_t permille, size_t width) {
  const int64_t p = std::clamp<int64_t>(permille, 0, 1000);
  const auto w = static_cast<int64_t>(width);
  int64_t filled = (p * w + 500) / 1000;
  if (p < 1000 && filled == w) {
    filled = w - 1;
  }
  if (p > 0 && filled == 0) {
    filled = std::min<int64_t>(1, w);
  }
  return filled;
}

std::string Repeat(std::string_view unit, int64_t n) {
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    out += unit;
  }
  return out;
}

std::string Bar(int64_t permille, size_t width, const Paint& paint, const char* color) {
  const int64_t filled = BarFill(permille, width);
  return "▕" + paint(color, Repeat("█", filled)) +
         std::string(width - static_cast<size_t>(filled), ' ') + "▏";
}

// ---------------------------------------------------------------------------------
// The frame.

struct JobInfo {
  std::string name;
  std::string tenant;
  std::string queue;
};

bool GpuLost(const json& gpu) {
  if (Str(gpu, "health") == "lost") {
    return true;
  }
  const json* telemetry = Field(gpu, "telemetry");
  return telemetry != nullptr && Bool(*telemetry, "lost", false);
}

// The drain reason, or nullopt when the GPU is not drained.
std::optional<std::string> GpuDrain(const json& gpu) {
  const json* drain = Field(gpu, "drain");
  if (drain != nullptr && drain->is_object()) {
    return Str(*drain, "reason");
  }
  if (Str(gpu, "health") == "drained") {
    return std::string();
  }
  return std::nullopt;
}

std::optional<int64_t> GpuMemoryMib(const json& gpu) {
  if (std::optional<int64_t> mib = OptInt(gpu, "memory_mib"); mib.has_value() && *mib > 0) {
    return mib;
  }
  if (const json* t = Field(gpu, "telemetry"); t != nullptr) {
    std::optional<int64_t> used = OptInt(*t, "fb_used_mib");
    std::optional<int64_t> free = OptInt(*t, "fb_free_mib");
    if (used.has_value() && free.has_value() && *used + *free > 0) {
      return *used + *free;
    }
  }
  return GibFromName(Str(gpu, "model"));
}

// The columns of one GPU line that depend on the GPU alone.
struct GpuCells {
  std::string index;   // "[0]"
  std::string model;
  std::string mode;
  std::string util;    // "util ▕███ ▏  78%" or blanks and "-"
  std::string memory;  // "mem ▕█  ▏" and "30.1/80 GiB"
  std::string mem_text;
  std::string temp;
  std::string power;
  bool lost = false;
};

class Renderer {
 public:
  Renderer(const json& nodes, const json& jobs, const json& queues, const TopOptions& options)
      : nodes_(ListOf(nodes, "nodes")),
        jobs_(ListOf(jobs, "jobs")),
        options_(options),
        paint_(options.color),
        bar_width_(std::clamp<size_t>(options.bar_width, 1, 100)) {
    // Every tenant's jobs, counted per queue: a tenant's job list holds only its own.
    for (const json& q : ListOf(queues, "queues")) {
      if (Str(q, "kind") == "queue") {
        cluster_running_ = cluster_running_.value_or(0) + Int(q, "running");
        cluster_pending_ = cluster_pending_.value_or(0) + Int(q, "pending");
      }
    }
    for (const json& job : jobs_) {
      std::optional<int64_t> id = OptInt(job, "id");
      if (id.has_value()) {
        job_info_[*id] = JobInfo{Str(job, "name"), Str(job, "tenant"), Str(job, "queue")};
      }
    }
  }

  std::string Render() {
    if (!options_.title.empty()) {
      Emit(paint_(kBold, options_.title));
    }
    Header();
    std::vector<const json*> shown;
    for (const json& node : nodes_) {
      const std::string name = Str(node, "name");
      if (options_.nodes.empty() ||
          std::find(options_.nodes.begin(), options_.nodes.end(), name) != options_.nodes.end()) {
        shown.push_back(&node);
      }
    }
    if (shown.empty()) {
      Emit("");
      Emit(options_.nodes.empty() ? "no nodes have registered"
                                  : "no node named " + Join(options_.nodes, ", "));
    }
    Widths(shown);
    for (const json* node : shown) {
      Emit("");
      Node(*node);
    }
    Pending();
    std::string out;
    for (const std::string& line : lines_) {
      out += FitLine(line, options_.width);
      out += "\n";
    }
    return out;
  }

 private:
  void Emit(std::string line) { lines_.push_back(std::move(line)); }

  void Header() {
    size_t up = 0;
    size_t gpus = 0;
    size_t drained = 0;
    size_t lost = 0;
    int64_t used_milli = 0;
    int64_t util_sum = 0;
    size_t util_count = 0;
    for (const json& node : nodes_) {
      if (Str(node, "state") == "up") {
        ++up;
      }
      for (const json& gpu : Array(node, "gpus")) {
        ++gpus;
        used_milli += std::max<int64_t>(0, Int(gpu, "used_milli"));
        if (GpuLost(gpu)) {
          ++lost;
        } else if (GpuDrain(gpu).has_value()) {
          ++drained;
        }
        if (const json* t = Field(gpu, "telemetry"); t != nullptr && !GpuLost(gpu)) {
          if (std::optional<double> util = OptNumber(*t, "util_pct"); util.has_value()) {
            util_sum += std::llround(*util);
            ++util_count;
          }
        }
      }
    }
    size_t running = 0;
    size_t pending = 0;
    for (const json& job : jobs_) {
      const std::string state = Str(job, "state");
      if (state == "pending") {
        ++pending;
      } else if (state == "running" || state == "stopping") {
        ++running;
      }
    }
    std::string line = paint_(kBold, "cluster:") + " " + std::to_string(up) + "/" +
                       std::to_string(nodes_.size()) + " nodes up  GPUs " +
                       FormatMilli(used_milli) + "/" + std::to_string(gpus) + " in use";
    if (util_count > 0) {
      line += "  util " + std::to_string(util_sum / static_cast<int64_t>(util_count)) + "%";
    }
    const std::string drained_text = std::to_string(drained) + " drained";
    line += "  " + (drained > 0 ? paint_(kYellow, drained_text) : drained_text);
    if (lost > 0) {
      line += "  " + paint_(kRed, std::to_string(lost) + " lost");
    }
    const int64_t cluster_running = cluster_running_.value_or(static_cast<int64_t>(running));
    const int64_t cluster_pending = cluster_pending_.value_or(static_cast<int64_t>(pending));
    line += "  jobs " + std::to_string(cluster_running) + " running, " +
            std::to_string(cluster_pending) + " pending";
    Emit(line);
  }

  // Column widths shared by every node and GPU line of the frame.
  void Widths(const std::vector<const json*>& shown) {
    for (const json* node : shown) {
      node_width_ = std::max(node_width_, DisplayWidth(Str(*node, "name")));
      for (const json& gpu : Array(*node, "gpus")) {
        GpuCells cells = Cells(gpu);
        index_width_ = std::max(index_width_, DisplayWidth(cells.index));
        model_width_ = std::max(model_width_, DisplayWidth(cells.model));
        mem_text_width_ = std::max(mem_text_width_, DisplayWidth(cells.mem_text));
      }
    }
  }

  void Node(const json& node) {
    const std::string name = Str(node, "name");
    const std::string state = Str(node, "state");
    std::string line = paint_(kBold, PadRight(name.empty() ? "?" : name, node_width_)) + "  ";
    const std::string state_text = PadRight(state.empty() ? "?" : state, 4);
    line += state == "up" ? paint_(kGreen, state_text) : paint_(kRed, state_text);
    line += "  cpu " + FormatFixed(static_cast<double>(Int(node, "cpu_used_milli")) / 1000.0, 1) +
            "/" + FormatMilli(Int(node, "cpu_milli"));
    line += "  mem " + Gib(Int(node, "memory_used_mib")) + "/" + Gib(Int(node, "memory_mib")) +
            " GiB";
    const json& gpus = Array(node, "gpus");
    int64_t used = 0;
    for (const json& gpu : gpus) {
      used += std::max<int64_t>(0, Int(gpu, "used_milli"));
    }
    line += "  GPUs " + FormatMilli(used) + "/" + std::to_string(gpus.size());
    if (const json* drain = Field(node, "drain"); drain != nullptr && drain->is_object()) {
      const std::string reason = Str(*drain, "reason");
      line += "  " + paint_(kYellow, "DRAINED" + (reason.empty() ? "" : ": " + reason));
    } else if (!Bool(node, "schedulable", true)) {
      line += "  " + paint_(kYellow, "cordoned");
    }
    if (const std::string reason = Str(node, "reason"); state != "up" && !reason.empty()) {
      line += "  " + paint_(kRed, reason);
    }
    Emit(line);
    if (gpus.empty()) {
      Emit("  (no GPUs)");
    }
    for (const json& gpu : gpus) {
      Gpu(gpu);
    }
  }

  GpuCells Cells(const json& gpu) const {
    GpuCells c;
    std::optional<int64_t> index = OptInt(gpu, "index");
    c.index = "[" + (index.has_value() ? std::to_string(*index) : std::string("?")) + "]";
    c.model = Str(gpu, "model").empty() ? "?" : Str(gpu, "model");
    c.mode = Str(gpu, "mode").empty() ? "?" : Str(gpu, "mode");
    c.lost = GpuLost(gpu);
    const json* t = Field(gpu, "telemetry");
    if (t != nullptr && !t->is_object()) {
      t = nullptr;
    }
    // -1: unknown (plain integers: GCC 12 misreads optionals here at -O2).
    const int64_t total = GpuMemoryMib(gpu).value_or(-1);
    const int64_t fb_used = t != nullptr ? OptInt(*t, "fb_used_mib").value_or(-1) : -1;
    c.mem_text = (fb_used >= 0 ? Gib(fb_used) : "-") + "/" + (total > 0 ? Gib(total) : "-") +
                 " GiB";
    if (c.lost) {
      return c;
    }
    const std::string blank(bar_width_ + 2, ' ');
    std::optional<double> util = t != nullptr ? OptNumber(*t, "util_pct") : std::nullopt;
    if (util.has_value()) {
      const int64_t pct = std::clamp<int64_t>(std::llround(*util), 0, 100);
      c.util = "util " + Bar(pct * 10, bar_width_, paint_, kGreen) + " " +
               PadLeft(std::to_string(pct) + "%", 4);
    } else {
      c.util = "util " + blank + " " + PadLeft("-", 4);
    }
    if (fb_used >= 0 && total > 0) {
      const int64_t permille = std::clamp<int64_t>(fb_used * 1000 / total, 0, 1000);
      c.memory = "mem " + Bar(permille, bar_width_, paint_, kCyan);
    } else {
      c.memory = "mem " + blank;
    }
    std::optional<double> temp = t != nullptr ? OptNumber(*t, "temp_c") : std::nullopt;
    c.temp = temp.has_value() ? std::to_string(std::llround(*temp)) + "C" : "-";
    std::optional<double> power = t != nullptr ? OptNumber(*t, "power_w") : std::nullopt;
    if (!power.has_value() && t != nullptr) {
      if (std::optional<double> mw = OptNumber(*t, "power_mw"); mw.has_value()) {
        power = *mw / 1000.0;
      }
    }
    c.power = power.has_value() ? std::to_string(std::llround(*power)) + "W" : "-";
    return c;
  }

  // "job 12 train-gang" (the name from the holder, else from the job list).
  std::string JobText(const json& holder) const {
    std::optional<int64_t> id = OptInt(holder, "job");
    if (!id.has_value()) {
      return "job ?";
    }
    std::string name = Str(holder, "job_name");
    if (name.empty()) {
      auto it = job_info_.find(*id);
      if (it != job_info_.end()) {
        name = it->second.name;
      }
    }
    return "job " + std::to_string(*id) + (name.empty() ? "" : " " + name);
  }

  std::string HolderTenant(const json& holder) const {
    std::string tenant = Str(holder, "tenant");
    if (tenant.empty()) {
      if (std::optional<int64_t> id = OptInt(holder, "job"); id.has_value()) {
        auto it = job_info_.find(*id);
        if (it != job_info_.end()) {
          tenant = it->second.tenant;
        }
      }
    }
    return tenant.empty() ? "?" : tenant;
  }

  void Gpu(const json& gpu) {
    const GpuCells c = Cells(gpu);
    const std::string mode = Str(gpu, "mode");
    const bool sliced = mode == "shared" || mode == "mig";
    const json& holders = Array(gpu, "holders");
    std::string line = "  " + PadRight(c.index, index_width_) + " " +
                       PadRight(c.model, model_width_) + "  " + PadRight(c.mode, 9) + "  ";
    std::vector<std::string> tail;
    if (c.lost) {
      line += paint_(kRed, "LOST");
    } else {
      line += c.util + "  " + c.memory + " " + PadLeft(c.mem_text, mem_text_width_) + "  " +
              PadLeft(c.temp, 4) + " " + PadLeft(c.power, 5);
      if (std::optional<std::string> drain = GpuDrain(gpu); drain.has_value()) {
        tail.push_back(paint_(kYellow, "DRAINED" + (drain->empty() ? "" : ": " + *drain)));
      }
    }
    if (holders.empty()) {
      tail.push_back(paint_(kDim, "free"));
    } else if (!sliced) {
      std::vector<std::string> parts;
      for (const json& holder : holders) {
        parts.push_back(paint_.Tenant(HolderTenant(holder)) + " " + JobText(holder));
      }
      tail.push_back(Join(parts, ", "));
    } else {
      const size_t n = holders.size();
      std::string what = mode == "mig" ? (n == 1 ? " MIG instance" : " MIG instances")
                                       : (n == 1 ? " share" : " shares");
      tail.push_back(std::to_string(n) + what + ", " + FormatMilli(Int(gpu, "used_milli")) +
                     " GPU");
    }
    Emit(line + "  " + Join(tail, "  "));
    if (sliced) {
      Slices(gpu, holders);
    }
  }

  // One sub-line per holder of a shared or MIG GPU.
  void Slices(const json& gpu, const json& holders) {
    size_t tenant_width = 0;
    size_t job_width = 0;
    size_t slice_width = 0;
    struct Row {
      std::string tenant, job, slice, memory;
      int64_t start = INT64_MAX;  // MIG instances in slot order, as nvidia-smi lists them
    };
    std::vector<Row> rows;
    const json* t = Field(gpu, "telemetry");
    static const json kNoTelemetry;
    const json& mig_telemetry = Array(t != nullptr ? *t : kNoTelemetry, "mig");
    for (const json& holder : holders) {
      Row row;
      row.tenant = HolderTenant(holder);
      row.job = Truncate(JobText(holder), 32);
      const std::string profile = Str(holder, "mig_profile");
      std::optional<int64_t> memory = OptInt(holder, "memory_mib");
      if (!profile.empty()) {
        row.slice = "mig " + profile;
        row.start = OptInt(holder, "mig_start").value_or(INT64_MAX);
        if (!memory.has_value()) {
          const size_t dot = profile.find('.');
          memory = dot == std::string::npos ? std::nullopt : GibFromName(profile.substr(dot + 1));
        }
      } else {
        row.slice = "share " + FormatMilli(Int(holder, "milli"));
      }
      row.memory = memory.has_value() ? "mem " + Gib(*memory) + " GiB" : "mem -";
      if (!profile.empty()) {
        // The instance's framebuffer use, matched by UUID, else by profile and start.
        const std::string uuid = Str(holder, "mig_uuid");
        std::optional<int64_t> start = OptInt(holder, "mig_start");
        for (const json& inst : mig_telemetry) {
          const bool same = !uuid.empty() ? Str(inst, "uuid") == uuid
                                          : start.has_value() && OptInt(inst, "start") == start &&
                                                Str(inst, "profile") == profile;
          std::optional<int64_t> used = OptInt(inst, "fb_used_mib");
          if (same && used.has_value()) {
            row.memory += ", " + Gib(*used) + " GiB used";
            break;
          }
        }
      }
      tenant_width = std::max(tenant_width, DisplayWidth(row.tenant));
      job_width = std::max(job_width, DisplayWidth(row.job));
      slice_width = std::max(slice_width, DisplayWidth(row.slice));
      rows.push_back(std::move(row));
    }
    std::stable_sort(rows.begin(), rows.end(),
                     [](const Row& a, const Row& b) { return a.start < b.start; });
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& row = rows[i];
      const std::string branch = i + 1 < rows.size() ? "├─ " : "└─ ";
      std::string padded_tenant = paint_.Tenant(row.tenant) +
                                  std::string(tenant_width - DisplayWidth(row.tenant), ' ');
      Emit("  " + std::string(index_width_, ' ') + " " + branch + padded_tenant + "  " +
           PadRight(row.job, job_width) + "  " + PadRight(row.slice, slice_width) + "  " +
           row.memory);
    }
  }

  void Pending() {
    std::vector<const json*> pending;
    for (const json& job : jobs_) {
      if (Str(job, "state") == "pending") {
        pending.push_back(&job);
      }
    }
    std::stable_sort(pending.begin(), pending.end(), [](const json* a, const json* b) {
      return Int(*a, "id") < Int(*b, "id");
    });
    Emit("");
    // Pending jobs the listing does not hold (other tenants', or past its page): a count.
    const int64_t hidden =
        std::max<int64_t>(0, cluster_pending_.value_or(0) - static_cast<int64_t>(pending.size()));
    const std::string others =
        hidden > 0 ? " (and " + std::to_string(hidden) + " more in the cluster, not listed)" : "";
    if (pending.empty()) {
      Emit(paint_(kBold, "pending jobs: none") + others);
      return;
    }
    Emit(paint_(kBold, "pending jobs: " + std::to_string(pending.size())) + others);
    const size_t shown = std::min(pending.size(), options_.max_pending);
    size_t id_width = 0;
    size_t tenant_width = 0;
    size_t name_width = 0;
    size_t gpus_width = 0;
    auto gpus_text = [](const json& job) {
      const int64_t gpus = Int(job, "gpus");
      const int64_t milli = Int(job, "gpu_milli");
      const std::string n =
          milli > 0 && milli != gpus * 1000 ? FormatMilli(milli) : std::to_string(gpus);
      return n + (n == "1" ? " GPU" : " GPUs");
    };
    for (size_t i = 0; i < shown; ++i) {
      const json& job = *pending[i];
      id_width = std::max(id_width, std::to_string(Int(job, "id")).size());
      tenant_width = std::max(tenant_width, DisplayWidth(Str(job, "tenant")));
      name_width = std::max(name_width, DisplayWidth(Truncate(Str(job, "name"), 24)));
      gpus_width = std::max(gpus_width, DisplayWidth(gpus_text(job)));
    }
    for (size_t i = 0; i < shown; ++i) {
      const json& job = *pending[i];
      const std::string tenant = Str(job, "tenant");
      const std::string reason = Str(job, "reason");
      Emit("  " + PadLeft(std::to_string(Int(job, "id")), id_width) + "  " +
           paint_.Tenant(tenant) + std::string(tenant_width - DisplayWidth(tenant), ' ') + "  " +
           PadRight(Truncate(Str(job, "name"), 24), name_width) + "  " +
           PadRight(gpus_text(job), gpus_width) + "  " + (reason.empty() ? "-" : reason));
    }
    if (pending.size() > shown) {
      Emit("  … and " + std::to_string(pending.size() - shown) + " more");
    }
  }

  const json& nodes_;
  const json& jobs_;
  const TopOptions& options_;
  std::optional<int64_t> cluster_running_, cluster_pending_;  // from the queues, if given
  Paint paint_;
  size_t bar_width_;
  std::map<int64_t, JobInfo> job_info_;
  std::vector<std::string> lines_;
  size_t node_width_ = 0;
  size_t index_width_ = 0;
  size_t model_width_ = 0;
  size_t mem_text_width_ = 0;
};

}  // namespace

std::string UsageBar(int64_t permille, size_t width) {
  return Bar(permille, width, Paint(false), "");
}

std::string TenantColor(std::string_view tenant) {
  static constexpr const char* kPalette[] = {"32", "33", "34", "35", "36",
                                             "92", "93", "94", "95", "96"};
  uint32_t hash = 2166136261U;
  for (char c : tenant) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 16777619U;
  }
  return kPalette[hash % (sizeof(kPalette) / sizeof(kPalette[0]))];
}

std::string FitLine(std::string_view line, size_t width) {
  if (width == 0) {
    return std::string(line);
  }
  // Calls `visit(begin, length, is_escape)` for each escape sequence and code point.
  auto walk = [&line](auto&& visit) {
    size_t i = 0;
    while (i < line.size()) {
      const auto c = static_cast<unsigned char>(line[i]);
      if (c == 0x1b && i + 1 < line.size() && line[i + 1] == '[') {
        size_t j = i + 2;
        while (j < line.size() && (line[j] < 0x40 || line[j] > 0x7e)) {
          ++j;
        }
        j = std::min(j + 1, line.size());
        if (!visit(i, j - i, true)) {
          return;
        }
        i = j;
        continue;
      }
      size_t len = 1;
      if (c >= 0xf0) {
        len = 4;
      } else if (c >= 0xe0) {
        len = 3;
      } else if (c >= 0xc0) {
        len = 2;
      }
      len = std::min(len, line.size() - i);
      if (!visit(i, len, false)) {
        return;
      }
      i += len;
    }
  };
  size_t columns = 0;
  walk([&](size_t, size_t, bool escape) {
    columns += escape ? 0 : 1;
    return true;
  });
  if (columns <= width) {
    return std::string(line);
  }
  // Keep width-1 code points (and the escapes among them), then the ellipsis.
  std::string out;
  size_t kept = 0;
  bool escapes = false;
  walk([&](size_t begin, size_t length, bool escape) {
    if (escape) {
      escapes = true;
    } else if (kept == width - 1) {
      return false;
    } else {
      ++kept;
    }
    out.append(line.substr(begin, length));
    return true;
  });
  out += "…";
  if (escapes) {
    out += "\x1b[0m";
  }
  return out;
}

std::string RenderTop(const json& nodes, const json& jobs, const TopOptions& options) {
  return Renderer(nodes, jobs, json(), options).Render();
}

std::string RenderTop(const json& nodes, const json& jobs, const json& queues,
                      const TopOptions& options) {
  return Renderer(nodes, jobs, queues, options).Render();
}

}  // namespace tessera
