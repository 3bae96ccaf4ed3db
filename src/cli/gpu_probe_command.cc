#include "cli/gpu_probe_command.h"

#include <iostream>
#include <memory>

#include "agent/gpu/fake_gpus.h"
#include "agent/gpu/gpu_probe.h"
#include "agent/gpu/nvml_backend.h"
#include "api/units.h"

namespace tessera {
namespace {

struct GpuProbeFlags {
  std::string nvml = "libnvidia-ml.so.1";
  std::string fake_gpus;
  int samples = 3;
  std::string interval = "1s";
  bool mig_check = false;
  std::vector<int> gpus;
  bool json = false;
};

void PrintSummary(const nlohmann::json& r) {
  std::cout << std::boolalpha << "backend: " << r["backend"].get<std::string>() << "\n";
  const nlohmann::json& last = r["samples"].back();
  for (const nlohmann::json& g : r["gpus"]) {
    std::cout << "GPU " << g["index"] << ": " << g["product"].get<std::string>() << " ("
              << (g["model"].get<std::string>().empty() ? "not in the catalog" : g["model"].get<std::string>())
              << "), " << g["memory_mib"] << " MiB, MIG " << (g["mig_enabled"].get<bool>() ? "on" : "off")
              << ", NUMA " << g["numa_node"] << ", NVLink domain " << g["nvlink_domain"];
    const int i = g["index"].get<int>();
    if (last.is_array() && i < static_cast<int>(last.size())) {
      const nlohmann::json& t = last[i];
      std::cout << "; util " << t.value("util_pct", 0) << " %, " << t.value("temp_c", 0) << " C, "
                << t.value("power_mw", 0) / 1000 << " W, used " << t.value("fb_used_mib", 0) << " MiB"
                << (t.value("lost", false) ? ", LOST" : "");
    }
    std::cout << "\n";
  }
  for (const nlohmann::json& m : r["mig_check"]) {
    std::cout << "MIG check GPU " << m["gpu"] << ": ";
    if (m.contains("skipped")) {
      std::cout << "skipped, " << m["skipped"].get<std::string>() << "\n";
      continue;
    }
    std::cout << m.value("profile", "") << " at slot " << m.value("start", -1) << ": created "
              << m.value("created", false) << " (" << m.value("create_ms", 0.0) << " ms), visible "
              << m.value("visible", false) << ", destroyed " << m.value("destroyed", false) << " ("
              << m.value("destroy_ms", 0.0) << " ms), gone " << m.value("gone", false);
    if (m.contains("error")) {
      std::cout << ", error: " << m["error"].get<std::string>();
    }
    std::cout << "\n";
  }
  std::cout << (r["ok"].get<bool>() ? "ok\n" : "FAILED\n");
}

int Run(const GpuProbeFlags& f) {
  StatusOr<int64_t> interval = ParseDurationMicros(f.interval);
  if (!interval.ok() || *interval <= 0) {
    std::cerr << "tessera gpu-probe: --interval: " << (interval.ok() ? "must be positive" : interval.status().message())
              << "\n";
    return 2;
  }
  const GpuCatalog& catalog = GpuCatalog::Default();
  StatusOr<std::unique_ptr<GpuBackend>> backend =
      f.fake_gpus.empty() ? LoadNvmlBackend(catalog, NvmlBackendOptions{f.nvml, "/sys"})
                          : MakeFakeGpuBackend(f.fake_gpus, catalog, "probe");
  if (!backend.ok()) {
    std::cerr << "tessera gpu-probe: " << backend.status().message() << "\n";
    return f.fake_gpus.empty() ? 3 : 2;
  }
  GpuProbeOptions o;
  o.samples = f.samples;
  o.interval = std::chrono::milliseconds(*interval / 1000);
  o.mig_check = f.mig_check;
  o.mig_gpus = f.gpus;
  StatusOr<nlohmann::json> report = RunGpuProbe(**backend, catalog, o);
  if (!report.ok()) {
    std::cerr << "tessera gpu-probe: " << report.status().message() << "\n";
    return report.status().code() == StatusCode::kInvalidArgument ? 2 : 3;
  }
  if (f.json) {
    std::cout << report->dump(2) << "\n";
  } else {
    PrintSummary(*report);
  }
  return (*report)["ok"].get<bool>() ? 0 : 1;
}

}  // namespace

void AddGpuProbeCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<GpuProbeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "gpu-probe", "What the agent sees on this machine: GPUs, telemetry, a MIG create/destroy check");
  cmd->add_option("--nvml", f->nvml, "NVML library (path or soname)")->capture_default_str();
  cmd->add_option("--fake-gpus", f->fake_gpus, "Probe a fake inventory instead (see `tessera agent --help`)");
  cmd->add_option("--samples", f->samples, "Telemetry samples")->capture_default_str()->check(CLI::Range(1, 3600));
  cmd->add_option("--interval", f->interval, "Time between samples")->capture_default_str();
  cmd->add_flag("--mig-check", f->mig_check,
                "On GPUs already in MIG mode, create and destroy one instance of the smallest profile "
                "(never changes a GPU's mode)");
  cmd->add_option("--gpu", f->gpus, "Limit --mig-check to these GPU indexes");
  cmd->add_flag("--json", f->json, "Print the report as JSON");
  cmd->callback([f, exit_code] { *exit_code = Run(*f); });
}

}  // namespace tessera
