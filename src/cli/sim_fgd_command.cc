#include "cli/sim_fgd_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "base/strings.h"
#include "cli/output_files.h"
#include "plugins/fgd.h"
#include "plugins/registry.h"
#include "sim/fgd_grid.h"
#include "sim/fgd_report.h"
#include "sim/openb_trace.h"

namespace tessera {
namespace {

struct FgdOptions {
  std::string nodes;
  std::vector<std::string> pods;
  std::string policies = "random,dotprod,gpuclustering,gpupacking,bestfit,fgd,tessera";
  std::string seeds = "42-51";
  std::string out = "out/fgd";
  std::string expected;
  double tune = 1.3;
  std::string tie_break = "node-order";
  int jobs = 0;
  bool json = false;
  std::string pin;                // percents of GPU pods to pin, e.g. "25,50"; 0: as read
  std::string pin_to = "subset";  // subset, single and/or scarce, comma-separated
  uint64_t pin_seed = 1;
};

// The pinned variants asked for: every percent of --pin with every mode of --pin-to;
// none (the lists as read) without --pin.
StatusOr<std::vector<PinSpec>> ParsePins(const FgdOptions& o) {
  std::vector<PinSpec> pins;
  if (Trim(o.pin).empty()) {
    pins.push_back(PinSpec{});
    return pins;
  }
  StatusOr<std::vector<int64_t>> parsed = ParseIntList(o.pin);
  if (!parsed.ok()) {
    return InvalidArgumentError("--pin: " + parsed.status().message());
  }
  const std::vector<int64_t>& percents = *parsed;
  std::vector<PinMode> modes;
  for (std::string_view m : Split(o.pin_to, ',')) {
    if (Trim(m) == "subset") {
      modes.push_back(PinMode::kSubset);
    } else if (Trim(m) == "single") {
      modes.push_back(PinMode::kSingle);
    } else if (Trim(m) == "scarce") {
      modes.push_back(PinMode::kScarce);
    } else {
      return InvalidArgumentError("--pin-to must list subset, single and/or scarce, got '" +
                                  std::string(m) + "'");
    }
  }
  for (int64_t p : percents) {
    if (p < 0 || p > 100) {
      return InvalidArgumentError("--pin percents must be in 0..100, got " + std::to_string(p));
    }
    for (PinMode m : modes) {
      pins.push_back(PinSpec{static_cast<int>(p), m, o.pin_seed});
      if (p == 0) {
        break;  // the list as read, once
      }
    }
  }
  return pins;
}

StatusOr<std::vector<std::string>> ParsePolicies(std::string_view list) {
  std::vector<std::string> policies;
  for (std::string_view p : Split(list, ',')) {
    std::string name(Trim(p));
    if (name.empty()) {
      continue;
    }
    if (std::find(PolicyNames().begin(), PolicyNames().end(), name) == PolicyNames().end()) {
      return InvalidArgumentError("unknown policy '" + name +
                                  "'; known: " + Join(PolicyNames(), ", "));
    }
    policies.push_back(name);
  }
  if (policies.empty()) {
    return InvalidArgumentError("--policy lists no policy");
  }
  return policies;
}

StatusOr<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> seed_list, ParseIntList(text));
  std::vector<uint64_t> seeds;
  for (int64_t s : seed_list) {
    if (s < 0) {
      return InvalidArgumentError("seeds must not be negative");
    }
    seeds.push_back(static_cast<uint64_t>(s));
  }
  return seeds;
}

// Each pod list (each of its pinned variants with --pin), and the typical tasks FGD
// scores fragmentation against.
Status LoadPodTraces(const std::vector<std::string>& paths, const GpuCatalog& catalog,
                     const std::vector<NodeSpec>& nodes, const std::vector<PinSpec>& pins,
                     std::vector<std::unique_ptr<PodList>>* traces,
                     std::vector<std::unique_ptr<FragmentationModel>>* typical) {
  for (const std::string& path : paths) {
    TESSERA_ASSIGN_OR_RETURN(PodList read, ReadOpenbPods(path, catalog));
    if (read.pods.empty()) {
      return InvalidArgumentError("'" + path + "' has no pods");
    }
    for (const PinSpec& pin : pins) {
      TESSERA_ASSIGN_OR_RETURN(PodList list, PinPodsToModels(read, nodes, pin));
      typical->push_back(std::make_unique<FragmentationModel>(FindTypicalTasks(list.Requests())));
      traces->push_back(std::make_unique<PodList>(std::move(list)));
    }
  }
  return Status::Ok();
}

// The authors' results to compare with: --expected, else the copy beside the trace when
// there is one, else none.
StatusOr<AuthorsResults> LoadAuthorsResults(const FgdOptions& o) {
  std::string expected = o.expected;
  if (expected.empty()) {
    auto guess = std::filesystem::path(o.nodes).parent_path() / ".." / "fgd-kss-expected-results" /
                 "analysis_allo_discrete.csv";
    if (std::filesystem::exists(guess)) {
      expected = guess.lexically_normal().string();
    }
  }
  if (expected.empty()) {
    return AuthorsResults{};
  }
  return ReadAuthorsResults(expected);
}

// Runs every trace x policy x seed, showing the progress on stderr; *wall: the seconds
// it took.
StatusOr<std::vector<FgdRunResult>> RunGrid(const FgdGridSpec& grid, double* wall) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  const size_t total = grid.traces.size() * grid.policies.size() * grid.seeds.size();
  std::fprintf(stderr, "tessera sim fgd: %zu runs (%zu traces x %zu policies x %zu seeds) on %s\n",
               total, grid.traces.size(), grid.policies.size(), grid.seeds.size(),
               grid.jobs > 0 ? (std::to_string(grid.jobs) + " threads").c_str() : "every core");
  auto started = std::chrono::steady_clock::now();
  size_t last_reported_decile = 0;
  auto progress = [&](const FgdGridProgress& p) {
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    double eta = elapsed / static_cast<double>(p.done) * static_cast<double>(p.total - p.done);
    size_t decile = p.done * 10 / p.total;
    if (tty) {
      std::fprintf(
          stderr, "\r[%zu/%zu] %s/%s seed %llu: %.2f%% unallocated  (%.0fs, ~%.0fs left)   ",
          p.done, p.total, p.run->trace.c_str(), p.run->policy.c_str(),
          static_cast<unsigned long long>(p.run->seed), p.run->UnallocatedAt100(), elapsed, eta);
      if (p.done == p.total) {
        std::fprintf(stderr, "\n");
      }
    } else if (decile != last_reported_decile || p.done == p.total) {
      last_reported_decile = decile;
      std::fprintf(stderr, "[%zu/%zu] %.0fs elapsed, ~%.0fs left\n", p.done, p.total, elapsed, eta);
    }
  };
  TESSERA_ASSIGN_OR_RETURN(std::vector<FgdRunResult> runs, RunFgdGrid(grid, progress));
  *wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return runs;
}

// The per-run CSVs, the summary and one plot per trace under --out; the summary also on
// stdout.
Status WriteResults(const FgdOptions& o, const std::vector<FgdRunResult>& runs,
                    const std::vector<FgdSummaryRow>& rows,
                    const std::vector<std::unique_ptr<PodList>>& traces,
                    const std::vector<std::string>& policies, double wall) {
  const std::filesystem::path dir(o.out);
  TESSERA_RETURN_IF_ERROR(WriteTextFile(dir / "analysis_allo_discrete.csv",
                                        DiscreteCsv(runs, DiscreteMetric::kAlloc, o.tune)));
  TESSERA_RETURN_IF_ERROR(WriteTextFile(dir / "analysis_frag_discrete.csv",
                                        DiscreteCsv(runs, DiscreteMetric::kFrag, o.tune)));
  TESSERA_RETURN_IF_ERROR(WriteTextFile(dir / "analysis_frag_ratio_discrete.csv",
                                        DiscreteCsv(runs, DiscreteMetric::kFragRatio, o.tune)));
  TESSERA_RETURN_IF_ERROR(WriteTextFile(dir / "summary.csv", SummaryCsv(rows)));
  TESSERA_RETURN_IF_ERROR(WriteTextFile(dir / "summary.txt", SummaryTable(rows)));
  nlohmann::json json = SummaryJson(rows);
  json["wall_seconds"] = RoundHalfEven(wall, 3);
  json["runs"] = runs.size();
  TESSERA_RETURN_IF_ERROR(WriteTextFile(dir / "summary.json", json.dump(2) + "\n"));
  for (const auto& t : traces) {
    TESSERA_RETURN_IF_ERROR(WriteTextFile(dir / ("unallocated_" + t->trace + ".svg"),
                                          UnallocatedSvg(t->trace, runs, policies)));
  }
  if (o.json) {
    std::cout << json.dump() << std::endl;
  } else {
    std::cout << SummaryTable(rows) << "\n"
              << runs.size() << " runs in " << RoundHalfEven(wall, 1) << " s; results in "
              << dir.string() << "/\n";
  }
  return Status::Ok();
}

Status Run(const FgdOptions& o) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> policies, ParsePolicies(o.policies));
  TESSERA_ASSIGN_OR_RETURN(std::vector<uint64_t> seeds, ParseSeeds(o.seeds));
  if (o.tune < 1.0 || o.tune > 10.0) {
    return InvalidArgumentError("--tune must be in 1..10 (the paper uses 1.3)");
  }

  TESSERA_ASSIGN_OR_RETURN(std::vector<PinSpec> pins, ParsePins(o));

  TESSERA_ASSIGN_OR_RETURN(std::vector<NodeSpec> node_specs, ReadOpenbNodes(o.nodes, catalog));
  TESSERA_ASSIGN_OR_RETURN(ClusterState cluster, ClusterState::Create(node_specs, catalog));
  if (cluster.total_gpus() == 0) {
    return InvalidArgumentError("'" + o.nodes + "' lists no GPU");
  }
  std::vector<std::unique_ptr<PodList>> traces;
  std::vector<std::unique_ptr<FragmentationModel>> typical;
  TESSERA_RETURN_IF_ERROR(LoadPodTraces(o.pods, catalog, node_specs, pins, &traces, &typical));
  TESSERA_ASSIGN_OR_RETURN(AuthorsResults authors, LoadAuthorsResults(o));

  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) {
    return UnavailableError("cannot create '" + o.out + "': " + ec.message());
  }

  FgdGridSpec grid;
  grid.cluster = &cluster;
  for (size_t i = 0; i < traces.size(); ++i) {
    grid.traces.push_back(traces[i].get());
    grid.typical.push_back(typical[i].get());
  }
  grid.policies = policies;
  grid.seeds = seeds;
  grid.tune_ratio = o.tune;
  grid.jobs = o.jobs;
  if (o.tie_break == "random") {
    grid.tie_break = TieBreak::kRandom;
  } else if (o.tie_break == "node-order") {
    grid.tie_break = TieBreak::kNodePriority;
  } else {
    return InvalidArgumentError("--tie-break must be random or node-order");
  }

  double wall = 0;
  TESSERA_ASSIGN_OR_RETURN(std::vector<FgdRunResult> runs, RunGrid(grid, &wall));
  std::vector<FgdSummaryRow> rows = Summarize(runs, authors, policies);
  return WriteResults(o, runs, rows, traces, policies, wall);
}

}  // namespace

void AddSimFgdCommand(CLI::App& sim, int* exit_code) {
  auto opts = std::make_shared<FgdOptions>();
  CLI::App* cmd = sim.add_subcommand(
      "fgd", "Replay the FGD paper's fragmentation experiment on the Alibaba GPU-sharing trace");
  cmd->add_option("--nodes", opts->nodes, "node list CSV (openb_node_list_gpu_node.csv)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--pods", opts->pods, "one or more pod list CSVs (openb_pod_list_*.csv)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--policy", opts->policies,
                  "comma-separated policies: random, dotprod, gpuclustering, gpupacking, "
                  "bestfit, fgd, tessera")
      ->capture_default_str();
  cmd->add_option("--seeds", opts->seeds, "seeds, e.g. 42-51 or 1,5,9")->capture_default_str();
  cmd->add_option("--out", opts->out, "output directory")->capture_default_str();
  cmd->add_option("--tune", opts->tune, "workload as a multiple of GPU capacity")
      ->capture_default_str();
  cmd->add_option("--tie-break", opts->tie_break,
                  "among equally scored nodes: node-order (first in a random node order drawn "
                  "once per seed, as the authors' simulator) or random (per placement)")
      ->capture_default_str();
  cmd->add_option("--jobs,-j", opts->jobs, "worker threads (default: one per core)");
  cmd->add_option("--expected", opts->expected,
                  "the authors' analysis_allo_discrete.csv to compare with (default: found "
                  "beside the trace when present)");
  cmd->add_option("--pin", opts->pin,
                  "model-constrained variants: percents of GPU pods to pin to GPU models "
                  "their request fits, e.g. 25,50 (0: the list as read); each pod list "
                  "becomes one variant per percent and --pin-to mode, named "
                  "LIST-pinP[one|scarce]");
  cmd->add_option("--pin-to", opts->pin_to,
                  "comma-separated: subset (a random non-empty subset of the fitting models), "
                  "single (one model; both drawn in proportion to their GPUs), scarce (one "
                  "model, the fewest nodes first, each up to its share of the demand)")
      ->capture_default_str();
  cmd->add_option("--pin-seed", opts->pin_seed, "seed of the pinning draw")->capture_default_str();
  cmd->add_flag("--json", opts->json, "print the summary as one JSON object on stdout");
  // A later --policy, --seeds, --out or --tune overrides an earlier one, so wrapper
  // scripts can pass defaults and users still choose.
  for (const char* name : {"--policy", "--seeds", "--out", "--tune"}) {
    cmd->get_option(name)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  cmd->callback([opts, exit_code]() {
    Status s = Run(*opts);
    if (!s.ok()) {
      std::cerr << "tessera sim fgd: " << s.ToString() << std::endl;
      *exit_code =
          s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ? 2 : 1;
    }
  });
}

}  // namespace tessera
