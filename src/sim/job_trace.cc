#include "sim/job_trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <span>
#include <system_error>
#include <utility>

#include "base/strings.h"

namespace tessera {
namespace {

constexpr double kMicrosPerSecond = 1e6;
// Largest time a trace may state, in seconds (about 31,700 years): keeps every
// conversion to Micros far from int64 overflow.
constexpr double kMaxSeconds = 1e12;
// Largest GPU count of one job.
constexpr int64_t kMaxJobGpus = 1'000'000;
// Largest submission span ScaleToLoad produces, in microseconds (about 3,170 years).
constexpr double kMaxScaledSpan = 1e17;

std::string At(const std::string& path, int line) {
  return path + ":" + std::to_string(line) + ": ";
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFoundError("cannot open '" + path + "'");
  }
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) {
    return InvalidArgumentError("cannot read '" + path + "'");
  }
  in.seekg(0, std::ios::beg);
  std::string data(static_cast<size_t>(size), '\0');
  if (!in.read(data.data(), size)) {
    return InvalidArgumentError("cannot read '" + path + "'");
  }
  return data;
}

// A CSV file read at once, walked line by line. Fields are split on ',' and trimmed;
// quoted fields are not supported (none of the traces uses them).
class CsvFile {
 public:
  // Reads `path` and its header (the first non-blank line), and finds the columns
  // `required` by name. Row cells are then handed out in the order of `required`.
  static StatusOr<CsvFile> Open(const std::string& path,
                                std::span<const std::string_view> required) {
    TESSERA_ASSIGN_OR_RETURN(std::string data, ReadWholeFile(path));
    CsvFile f(path, std::move(data));
    std::string_view header;
    if (!f.NextLine(&header)) {
      return InvalidArgumentError("'" + path + "' is empty");
    }
    for (std::string_view name : Split(header, ',')) {
      f.header_.emplace_back(Trim(name));
    }
    for (std::string_view want : required) {
      auto it = std::find(f.header_.begin(), f.header_.end(), want);
      if (it == f.header_.end()) {
        return InvalidArgumentError("'" + path + "' has no column '" + std::string(want) +
                                    "' (header: " + Join(f.header_, ",") + ")");
      }
      f.columns_.push_back(static_cast<size_t>(it - f.header_.begin()));
    }
    f.required_ = std::vector<std::string>(required.begin(), required.end());
    f.all_.reserve(f.header_.size());
    f.cells_.resize(required.size());
    return f;
  }

  // Moves to the next non-blank row. Returns false at the end of the file, and an
  // error (with file and line) when the row's field count differs from the header's.
  StatusOr<bool> Next() {
    std::string_view line;
    if (!NextLine(&line)) {
      return false;
    }
    all_.clear();
    size_t start = 0;
    while (true) {
      const size_t comma = line.find(',', start);
      if (comma == std::string_view::npos) {
        all_.push_back(Trim(line.substr(start)));
        break;
      }
      all_.push_back(Trim(line.substr(start, comma - start)));
      start = comma + 1;
    }
    if (all_.size() != header_.size()) {
      return InvalidArgumentError(where() + std::to_string(all_.size()) + " fields, header has " +
                                  std::to_string(header_.size()));
    }
    for (size_t i = 0; i < columns_.size(); ++i) {
      cells_[i] = all_[columns_[i]];
    }
    return true;
  }

  // The current row's value of required column `i`.
  std::string_view cell(size_t i) const { return cells_[i]; }
  int line() const { return line_; }
  const std::string& path() const { return path_; }
  // "path:line: "
  std::string where() const { return At(path_, line_); }
  // "path:line: column 'name': "
  std::string where(size_t i) const { return where() + "column '" + required_[i] + "': "; }

 private:
  CsvFile(std::string path, std::string data) : path_(std::move(path)), data_(std::move(data)) {}

  // The next non-blank line, without its line break.
  bool NextLine(std::string_view* out) {
    const std::string_view data(data_);
    while (pos_ < data.size()) {
      size_t end = data.find('\n', pos_);
      if (end == std::string_view::npos) {
        end = data.size();
      }
      std::string_view line = data.substr(pos_, end - pos_);
      pos_ = end + 1;
      ++line_;
      if (!Trim(line).empty()) {
        *out = line;
        return true;
      }
    }
    return false;
  }

  std::string path_;
  std::string data_;
  size_t pos_ = 0;
  int line_ = 0;
  std::vector<std::string> header_;
  std::vector<std::string> required_;
  std::vector<size_t> columns_;
  std::vector<std::string_view> all_;
  std::vector<std::string_view> cells_;
};

// Parses the whole of `text` as a finite decimal number ("66.0", "1e3", "+2").
StatusOr<double> ParseNumber(std::string_view text) {
  if (text.empty()) {
    return InvalidArgumentError("expected a number, got an empty value");
  }
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (*first == '+') {
    ++first;
  }
  double value = 0;
  auto [ptr, ec] = std::from_chars(first, last, value, std::chars_format::general);
  if (ec != std::errc() || ptr != last || !std::isfinite(value)) {
    return InvalidArgumentError("expected a number, got '" + std::string(text) + "'");
  }
  return value;
}

// A count of `what` in 0..max, as an integer.
StatusOr<int64_t> CountCell(const CsvFile& f, size_t i, int64_t max) {
  StatusOr<int64_t> v = ParseInt64(f.cell(i));
  if (!v.ok()) {
    return InvalidArgumentError(f.where(i) + v.status().message());
  }
  if (*v < 0 || *v > max) {
    return InvalidArgumentError(f.where(i) + "must be in 0.." + std::to_string(max) + ", got " +
                                std::to_string(*v));
  }
  return *v;
}

// A time in seconds (>= 0, fraction allowed), converted to microseconds.
StatusOr<Micros> SecondsCell(const CsvFile& f, size_t i) {
  StatusOr<double> v = ParseNumber(f.cell(i));
  if (!v.ok()) {
    return InvalidArgumentError(f.where(i) + v.status().message());
  }
  if (*v < 0 || *v > kMaxSeconds) {
    return InvalidArgumentError(f.where(i) + "seconds must be in 0..1e12, got '" +
                                std::string(f.cell(i)) + "'");
  }
  return static_cast<Micros>(std::llround(*v * kMicrosPerSecond));
}

bool IsLeapYear(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int DaysInMonth(int64_t y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeapYear(y) ? 29 : kDays[m - 1];
}

// Days since 1970-01-01 of the proleptic Gregorian date y-m-d (H. Hinnant's
// days_from_civil).
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;                                    // [0, 399]
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;            // [0, 146096]
  return era * 146097 + doe - 719468;
}

// "YYYY-MM-DD HH:MM:SS" (a 'T' is accepted for the space) read as UTC, in
// microseconds since the Unix epoch. Independent of the locale and the TZ variable.
StatusOr<Micros> ParseUtcTimestamp(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("expected a time \"YYYY-MM-DD HH:MM:SS\", got '" +
                                std::string(text) + "' (" + std::string(why) + ")");
  };
  constexpr std::string_view kShape = "dddd-dd-dd dd:dd:dd";
  if (text.size() != kShape.size()) {
    return bad("wrong length");
  }
  for (size_t i = 0; i < kShape.size(); ++i) {
    const char c = text[i];
    const bool ok = kShape[i] == 'd'   ? (c >= '0' && c <= '9')
                    : kShape[i] == ' ' ? (c == ' ' || c == 'T')
                                       : c == kShape[i];
    if (!ok) {
      return bad("unexpected character");
    }
  }
  auto num = [&](size_t pos, size_t len) {
    int v = 0;
    for (size_t i = pos; i < pos + len; ++i) {
      v = v * 10 + (text[i] - '0');
    }
    return v;
  };
  const int year = num(0, 4), month = num(5, 2), day = num(8, 2);
  const int hour = num(11, 2), minute = num(14, 2), second = num(17, 2);
  if (month < 1 || month > 12) {
    return bad("month out of range");
  }
  if (day < 1 || day > DaysInMonth(year, month)) {
    return bad("day out of range");
  }
  if (hour > 23 || minute > 59 || second > 59) {
    return bad("time of day out of range");
  }
  const int64_t seconds =
      DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  return static_cast<Micros>(seconds) * 1'000'000;
}

// Sorts by submission (stable) and makes submissions relative to the first.
// Sorts keys and file positions rather than the jobs, then moves each job once.
void Finish(JobTrace* trace) {
  std::vector<TraceJob>& jobs = trace->jobs;
  if (jobs.empty()) {
    return;
  }
  const bool sorted =
      std::is_sorted(jobs.begin(), jobs.end(),
                     [](const TraceJob& a, const TraceJob& b) { return a.submit < b.submit; });
  if (!sorted) {
    std::vector<std::pair<Micros, size_t>> order;  // (submit, file position): stable
    order.reserve(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      order.emplace_back(jobs[i].submit, i);
    }
    std::sort(order.begin(), order.end());
    std::vector<TraceJob> out;
    out.reserve(jobs.size());
    for (const auto& [submit, i] : order) {
      out.push_back(std::move(jobs[i]));
    }
    jobs = std::move(out);
  }
  const Micros first = trace->jobs.front().submit;
  for (TraceJob& j : trace->jobs) {
    j.submit -= first;
  }
}

// --- Pollux profiles -------------------------------------------------------------------

struct ScalePoint {
  int64_t nodes = 0;
  int64_t replicas = 0;
  double local_bsz = 0;
  double step_seconds = 0;  // step_time + sync_time
};

struct AppProfile {
  std::string dir;
  std::vector<ScalePoint> points;
  std::map<int64_t, std::string> validation_files;  // batch size -> path
  std::map<int64_t, int64_t> iterations;            // batch size -> iterations, once read
};

StatusOr<AppProfile> LoadProfile(const std::string& dir) {
  namespace fs = std::filesystem;
  AppProfile p;
  p.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return NotFoundError("no profile folder '" + dir + "'");
  }
  const std::string scal = (fs::path(dir) / "scalability.csv").string();
  static constexpr std::string_view kCols[] = {"num_nodes", "num_replicas", "local_bsz",
                                               "step_time", "sync_time"};
  TESSERA_ASSIGN_OR_RETURN(CsvFile f, CsvFile::Open(scal, kCols));
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool more, f.Next());
    if (!more) {
      break;
    }
    ScalePoint pt;
    TESSERA_ASSIGN_OR_RETURN(pt.nodes, CountCell(f, 0, kMaxJobGpus));
    TESSERA_ASSIGN_OR_RETURN(pt.replicas, CountCell(f, 1, kMaxJobGpus));
    if (pt.replicas < 1) {
      return InvalidArgumentError(f.where(1) + "must be at least 1");
    }
    double values[3];
    for (size_t i = 0; i < 3; ++i) {
      StatusOr<double> v = ParseNumber(f.cell(2 + i));
      if (!v.ok()) {
        return InvalidArgumentError(f.where(2 + i) + v.status().message());
      }
      if (*v < 0 || *v > kMaxSeconds) {
        return InvalidArgumentError(f.where(2 + i) + "must be in 0..1e12, got '" +
                                    std::string(f.cell(2 + i)) + "'");
      }
      values[i] = *v;
    }
    if (values[0] <= 0) {
      return InvalidArgumentError(f.where(2) + "must be positive");
    }
    pt.local_bsz = values[0];
    pt.step_seconds = values[1] + values[2];
    p.points.push_back(pt);
  }
  if (p.points.empty()) {
    return InvalidArgumentError("'" + scal + "' has no rows");
  }
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string file = e.path().filename().string();
    constexpr std::string_view kPrefix = "validation-", kSuffix = ".csv";
    if (!StartsWith(file, kPrefix) || !EndsWith(file, kSuffix)) {
      continue;
    }
    std::string_view batch = std::string_view(file).substr(
        kPrefix.size(), file.size() - kPrefix.size() - kSuffix.size());
    StatusOr<int64_t> b = ParseInt64(batch);
    if (!b.ok() || *b < 1) {
      continue;  // e.g. validation-notes.csv: not a profile
    }
    p.validation_files[*b] = e.path().string();
  }
  if (ec) {
    return NotFoundError("cannot list '" + dir + "': " + ec.message());
  }
  if (p.validation_files.empty()) {
    return NotFoundError("no validation-<batch>.csv in '" + dir + "'");
  }
  return p;
}

// Iterations to the end of training at `batch`: the last row's iteration of the
// validation file of the nearest profiled batch size (log distance; ties: smaller).
StatusOr<int64_t> Iterations(AppProfile* p, int64_t batch) {
  int64_t best = 0;
  double best_dist = std::numeric_limits<double>::infinity();
  for (const auto& [b, path] : p->validation_files) {
    const double dist =
        std::abs(std::log(static_cast<double>(b)) - std::log(static_cast<double>(batch)));
    if (dist < best_dist) {
      best_dist = dist;
      best = b;
    }
  }
  if (auto it = p->iterations.find(best); it != p->iterations.end()) {
    return it->second;
  }
  static constexpr std::string_view kCols[] = {"iteration"};
  TESSERA_ASSIGN_OR_RETURN(CsvFile f, CsvFile::Open(p->validation_files[best], kCols));
  int64_t last = -1;
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool more, f.Next());
    if (!more) {
      break;
    }
    TESSERA_ASSIGN_OR_RETURN(last, CountCell(f, 0, std::numeric_limits<int64_t>::max()));
  }
  if (last < 0) {
    return InvalidArgumentError("'" + f.path() + "' has no rows");
  }
  p->iterations[best] = last;
  return last;
}

// Seconds of one step (step plus sync time) at the profiled point nearest to
// (`replicas`, `local_bsz`): the exact replica count if profiled, else the nearest
// (log distance; ties: fewer); among its rows the nearest local batch (log distance;
// ties: smaller); then the fewest nodes; then file order.
double StepSeconds(const AppProfile& p, int64_t replicas, double local_bsz) {
  const double log_r = std::log(static_cast<double>(replicas));
  const double log_b = std::log(local_bsz);
  const ScalePoint* best = nullptr;
  double best_rd = 0, best_bd = 0;
  for (const ScalePoint& pt : p.points) {
    const double rd = std::abs(std::log(static_cast<double>(pt.replicas)) - log_r);
    const double bd = std::abs(std::log(pt.local_bsz) - log_b);
    bool better = best == nullptr;
    if (!better) {
      if (rd != best_rd) {
        better = rd < best_rd;
      } else if (pt.replicas != best->replicas) {
        better = pt.replicas < best->replicas;  // equally far on both sides: fewer
      } else if (bd != best_bd) {
        better = bd < best_bd;
      } else if (pt.local_bsz != best->local_bsz) {
        better = pt.local_bsz < best->local_bsz;
      } else {
        better = pt.nodes < best->nodes;
      }
    }
    if (better) {
      best = &pt;
      best_rd = rd;
      best_bd = bd;
    }
  }
  return best->step_seconds;
}

bool SafePathComponent(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of("/\\") == std::string_view::npos;
}

}  // namespace

StatusOr<JobTrace> ReadPhillyTrace(const std::string& path) {
  static constexpr std::string_view kCols[] = {"timestamp", "duration", "num_gpus", "cluster"};
  TESSERA_ASSIGN_OR_RETURN(CsvFile f, CsvFile::Open(path, kCols));
  JobTrace trace;
  trace.name = "philly";
  // Rows are kept compact (the tenant a view into the file) and sorted before the
  // jobs are built, so each job is built once, in place: the file has ~82k rows.
  struct Row {
    Micros submit;
    Micros duration;
    int gpus;
    int line;
    std::string_view tenant;
  };
  std::vector<Row> rows;
  rows.reserve(90'000);
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool more, f.Next());
    if (!more) {
      break;
    }
    StatusOr<Micros> submit = ParseUtcTimestamp(f.cell(0));
    if (!submit.ok()) {
      return InvalidArgumentError(f.where(0) + submit.status().message());
    }
    TESSERA_ASSIGN_OR_RETURN(Micros duration, SecondsCell(f, 1));
    TESSERA_ASSIGN_OR_RETURN(int64_t gpus, CountCell(f, 2, kMaxJobGpus));
    if (duration == 0 || gpus == 0) {
      ++trace.skipped;
      continue;
    }
    rows.push_back({*submit, duration, static_cast<int>(gpus), f.line(), f.cell(3)});
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.submit < b.submit; });
  const Micros first = rows.empty() ? 0 : rows.front().submit;
  trace.jobs.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    TraceJob& j = trace.jobs[i];
    j.name = "philly-" + std::to_string(rows[i].line);
    j.submit = rows[i].submit - first;
    j.duration = rows[i].duration;
    j.gpus = rows[i].gpus;
    j.tenant = std::string(rows[i].tenant);
  }
  return trace;
}

StatusOr<JobTrace> ReadTiresiasTrace(const std::string& path) {
  static constexpr std::string_view kCols[] = {"job_id", "num_gpu", "submit_time", "duration",
                                               "model_name"};
  TESSERA_ASSIGN_OR_RETURN(CsvFile f, CsvFile::Open(path, kCols));
  JobTrace trace;
  trace.name = "tiresias";
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool more, f.Next());
    if (!more) {
      break;
    }
    TESSERA_ASSIGN_OR_RETURN(int64_t gpus, CountCell(f, 1, kMaxJobGpus));
    TESSERA_ASSIGN_OR_RETURN(Micros submit, SecondsCell(f, 2));
    TESSERA_ASSIGN_OR_RETURN(Micros duration, SecondsCell(f, 3));
    if (duration == 0 || gpus == 0) {
      ++trace.skipped;
      continue;
    }
    TraceJob& j = trace.jobs.emplace_back();
    j.name = f.cell(0).empty() ? "tiresias-" + std::to_string(f.line()) : std::string(f.cell(0));
    j.submit = submit;
    j.duration = duration;
    j.gpus = static_cast<int>(gpus);
    j.application = std::string(f.cell(4));
  }
  Finish(&trace);
  return trace;
}

StatusOr<JobTrace> ReadPolluxWorkload(const std::string& path, const std::string& profiles_dir) {
  static constexpr std::string_view kCols[] = {"name", "time", "application", "num_replicas",
                                               "batch_size"};
  TESSERA_ASSIGN_OR_RETURN(CsvFile f, CsvFile::Open(path, kCols));
  JobTrace trace;
  trace.name = "pollux";
  std::map<std::string, AppProfile, std::less<>> profiles;
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool more, f.Next());
    if (!more) {
      break;
    }
    TESSERA_ASSIGN_OR_RETURN(Micros submit, SecondsCell(f, 1));
    const std::string_view app = f.cell(2);
    if (!SafePathComponent(app)) {
      return InvalidArgumentError(f.where(2) + "'" + std::string(app) +
                                  "' is not an application name");
    }
    TESSERA_ASSIGN_OR_RETURN(int64_t replicas, CountCell(f, 3, kMaxJobGpus));
    TESSERA_ASSIGN_OR_RETURN(int64_t batch, CountCell(f, 4, std::numeric_limits<int32_t>::max()));
    if (replicas == 0) {
      ++trace.skipped;
      continue;
    }
    if (batch < 1) {
      return InvalidArgumentError(f.where(4) + "must be at least 1");
    }
    auto it = profiles.find(app);
    if (it == profiles.end()) {
      StatusOr<AppProfile> p =
          LoadProfile((std::filesystem::path(profiles_dir) / std::string(app)).string());
      if (!p.ok()) {
        return Status(p.status().code(), f.where(2) + "application '" + std::string(app) +
                                             "': " + p.status().message());
      }
      it = profiles.emplace(std::string(app), std::move(*p)).first;
    }
    StatusOr<int64_t> iterations = Iterations(&it->second, batch);
    if (!iterations.ok()) {
      return Status(iterations.status().code(), f.where(4) + "application '" + std::string(app) +
                                                    "': " + iterations.status().message());
    }
    const double step = StepSeconds(it->second, replicas,
                                    static_cast<double>(batch) / static_cast<double>(replicas));
    const double seconds = std::min(static_cast<double>(*iterations) * step, kMaxSeconds);
    TraceJob& j = trace.jobs.emplace_back();
    j.name = f.cell(0).empty() ? "pollux-" + std::to_string(f.line()) : std::string(f.cell(0));
    j.submit = submit;
    j.duration = std::max<Micros>(1'000'000, std::llround(seconds * kMicrosPerSecond));
    j.gpus = static_cast<int>(replicas);
    j.application = std::string(app);
  }
  Finish(&trace);
  return trace;
}

StatusOr<JobTrace> ReadJobTrace(std::string_view spec, const std::string& traces_dir) {
  if (spec == "synthetic") {
    return MakeSyntheticTrace("");
  }
  const size_t colon = spec.find(':');
  if (colon != std::string_view::npos) {
    const std::string_view kind = spec.substr(0, colon);
    const std::string path(spec.substr(colon + 1));
    if (kind == "philly") {
      return ReadPhillyTrace(path);
    }
    if (kind == "tiresias") {
      return ReadTiresiasTrace(path);
    }
    if (kind == "synthetic") {
      return MakeSyntheticTrace(spec.substr(colon + 1));
    }
    if (kind == "pollux") {
      return ReadPolluxWorkload(path,
                                (std::filesystem::path(traces_dir) / "sia" / "traces").string());
    }
    // Not a known kind: a bare path that happens to hold a ':' is still a path, but a
    // word before the ':' that names no file is most likely a misspelt kind.
    std::error_code ec;
    if (kind.find('/') == std::string_view::npos &&
        !std::filesystem::exists(std::string(spec), ec)) {
      return InvalidArgumentError("unknown trace kind '" + std::string(kind) + "' in '" +
                                  std::string(spec) +
                                  "': expected philly:PATH, tiresias:PATH, pollux:PATH, "
                                  "synthetic:PARAMS or a bare PATH (read as Philly)");
    }
  }
  return ReadPhillyTrace(std::string(spec));
}

double OfferedLoad(const JobTrace& trace, int64_t cluster_gpus) {
  if (trace.jobs.empty() || cluster_gpus <= 0) {
    return 0;
  }
  Micros first = trace.jobs.front().submit, last = first;
  double demand = 0;  // GPU-microseconds
  for (const TraceJob& j : trace.jobs) {
    first = std::min(first, j.submit);
    last = std::max(last, j.submit);
    demand += static_cast<double>(j.gpus) * static_cast<double>(j.duration);
  }
  if (last <= first) {
    return 0;  // no span to spread the demand over
  }
  return demand / (static_cast<double>(cluster_gpus) * static_cast<double>(last - first));
}

double ScaleToLoad(JobTrace* trace, int64_t cluster_gpus, double target_load) {
  const double load = OfferedLoad(*trace, cluster_gpus);
  if (load <= 0 || !(target_load > 0) || !std::isfinite(target_load)) {
    return 1.0;  // nothing to scale (empty trace, zero span, no GPUs) or a bad target
  }
  Micros first = trace->jobs.front().submit, last = first;
  for (const TraceJob& j : trace->jobs) {
    first = std::min(first, j.submit);
    last = std::max(last, j.submit);
  }
  const double span = static_cast<double>(last - first);
  // The new span is rounded to whole microseconds first, so that the last job lands
  // exactly on it and the load is off the target by at most 0.5 us over the span.
  const double want = std::clamp(span * load / target_load, 1.0, kMaxScaledSpan);
  const double factor = std::round(want) / span;
  for (TraceJob& j : trace->jobs) {
    j.submit =
        first + static_cast<Micros>(std::llround(static_cast<double>(j.submit - first) * factor));
  }
  return factor;
}

}  // namespace tessera
