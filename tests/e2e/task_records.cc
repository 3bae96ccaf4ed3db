// The task script and the readers of its records (task_records.h).
#include "e2e/task_records.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <sstream>

#include "e2e/process.h"

namespace tessera::e2e {

const char* const TaskRecords::kScript =
    R"sh(me="$TESSERA_JOB_ID $TESSERA_TASK_INDEX $TESSERA_ATTEMPT"
id="$TESSERA_JOB_ID.$TESSERA_TASK_INDEX.$TESSERA_ATTEMPT"
rec="$RECORDS/$id"
gpus=$(echo "${CUDA_VISIBLE_DEVICES:-}" | tr , ' ')
echo "start $me $$ ${CUDA_VISIBLE_DEVICES:-none}" >> "$rec"
stamp() { echo "$1 $(cut -d' ' -f22 "/proc/$1/stat")"; }
alive() {
  st=$(cut -d' ' -f3,22 "/proc/$1/stat" 2>/dev/null) || return 1
  case "$st" in Z*) return 1 ;; esac
  [ "${st#* }" = "$2" ]
}
holds=""
for g in $gpus; do stamp $$ >> "$LOCKS/$g.$id"; holds="$holds $LOCKS/$g.$id"; done
for g in $gpus; do
  for f in "$LOCKS/$g".*; do
    [ -f "$f" ] && [ "$f" != "$LOCKS/$g.$id" ] || continue
    while read -r p t; do
      if alive "$p" "$t"; then echo "clash $me $g ${f##*/} $p" >> "$rec"; fi
    done < "$f"
  done
done
release() { for h in $holds; do rm -f "$h"; done; }
trap 'release; exit 143' TERM
w="$WORK"
if [ "$TESSERA_ATTEMPT" -gt 1 ]; then w="${WORK_RETRY:-$WORK}"; fi
if [ "${FORK:-0}" = 1 ]; then
  export W="$w" REC="$rec" ME="$me" HOLDS="$holds"
  sh -c 'sleep "$W" & a=$!; sleep "$W" & b=$!
    echo "workers $ME $$ $a $b" >> "$REC"
    for h in $HOLDS; do for p in $$ $a $b; do
      echo "$p $(cut -d" " -f22 /proc/$p/stat)" >> "$h"; done; done
    wait' &
  wait $!
else
  sleep "$w" & wait $!
fi
release
echo "end $me" >> "$rec"
)sh";

std::vector<Record> ReadRecords(const std::string& dir) {
  std::vector<Record> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::istringstream lines(Process::ReadFile(e.path().string()));
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream words(line);
      Record r;
      r.line = line;
      if (!(words >> r.kind >> r.job >> r.task >> r.attempt)) {
        r.kind = "malformed";
      }
      for (std::string w; words >> w;) {
        r.rest.push_back(w);
      }
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::optional<std::string> StartTime(pid_t pid) {
  const std::string stat = Process::ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream rest(stat.substr(paren + 2));
  std::string field, state;
  rest >> state;  // field 3
  for (int i = 4; i <= 22 && rest >> field; ++i) {
  }
  if (state == "Z" || state == "X") {
    return std::nullopt;  // it has ended; only its parent has not reaped it yet
  }
  return field;
}

bool Pid::Alive() const {
  if (::kill(pid, 0) != 0 && errno != EPERM) {
    return false;
  }
  std::optional<std::string> now = StartTime(pid);
  return now.has_value() && *now == start_time;
}

std::string Describe(const std::vector<Pid>& pids) {
  std::string s;
  for (const Pid& p : pids) {
    s += (s.empty() ? "" : " ") + std::to_string(p.pid);
  }
  return s;
}

std::string Show(const Runs& runs) {
  auto list = [](const std::vector<int>& v) {
    std::string s;
    for (int a : v) {
      s += " " + std::to_string(a);
    }
    return s;
  };
  return std::to_string(runs.starts.size()) + " start record(s) (attempts" + list(runs.starts) +
         "), " + std::to_string(runs.ends.size()) + " end record(s) (attempts" + list(runs.ends) +
         ")";
}

TaskRecords::TaskRecords(const std::string& dir)
    : records_(dir + "/records"), locks_(dir + "/locks") {
  // Tasks run as other uids: they pass through DIR (0711) to the records and holders.
  ok_ = !dir.empty();
  for (const std::string& d : {records_, locks_}) {
    std::error_code ec;
    ok_ = ok_ && std::filesystem::create_directory(d, ec) && ::chmod(d.c_str(), 01777) == 0;
  }
}

std::map<std::string, std::string> TaskRecords::Env(
    const std::string& work, const std::map<std::string, std::string>& more) const {
  std::map<std::string, std::string> env = {
      {"RECORDS", records_}, {"LOCKS", locks_}, {"WORK", work}};
  env.insert(more.begin(), more.end());
  return env;
}

nlohmann::json TaskRecords::Spec(const std::string& name, const std::string& queue, int gpus,
                                 const std::map<std::string, std::string>& env) {
  return {{"name", name},
          {"queue", queue},
          {"command", kScript},
          {"env", env},
          {"resources", {{"gpus", gpus}, {"cpu", "0.1"}, {"memory", "64MiB"}}}};
}

std::vector<Pid> TaskRecords::RecordedPids(const std::function<bool(const Record&)>& which) const {
  std::vector<Pid> out;
  for (const Record& r : Read()) {
    if (!which(r) || (r.kind != "start" && r.kind != "workers")) {
      continue;
    }
    const size_t n = r.kind == "start" ? 1 : r.rest.size();
    for (size_t i = 0; i < n && i < r.rest.size(); ++i) {
      const pid_t pid = static_cast<pid_t>(std::stol(r.rest[i]));
      std::optional<std::string> t = StartTime(pid);
      out.push_back({pid, t.value_or("gone")});
    }
  }
  return out;
}

std::map<uint64_t, Runs> TaskRecords::RunsByJob() const {
  std::map<uint64_t, Runs> out;
  for (const Record& r : Read()) {
    Runs& runs = out[r.job];
    if (r.kind == "start") {
      runs.starts.push_back(r.attempt);
    } else if (r.kind == "end") {
      runs.ends.push_back(r.attempt);
    } else if (r.kind == "clash") {
      runs.clashes.push_back(r.line);
    }
  }
  return out;
}

int TaskRecords::ExpectNoClash() const {
  int clashes = 0;
  for (const Record& r : Read()) {
    if (r.kind == "clash") {
      ++clashes;
      ADD_FAILURE() << "job " << r.job << " attempt " << r.attempt
                    << " found its GPU held by a live process of another task: " << r.line;
    } else if (r.kind == "malformed") {
      ADD_FAILURE() << "a task wrote a record this test cannot read: '" << r.line << "'";
    }
  }
  return clashes;
}

std::optional<Record> TaskRecords::WaitRecord(uint64_t job, int attempt, const std::string& kind,
                                              std::chrono::milliseconds timeout) const {
  std::optional<Record> found;
  WaitFor(
      [&] {
        for (const Record& r : Read()) {
          if (r.job == job && r.attempt == attempt && r.kind == kind) {
            found = r;
            return true;
          }
        }
        return false;
      },
      timeout);
  return found;
}

void TaskRecords::KillLeftovers() const {
  const std::string mark = "RECORDS=" + records_;
  for (const Pid& p : RecordedPids([](const Record&) { return true; })) {
    const std::string env = Process::ReadFile("/proc/" + std::to_string(p.pid) + "/environ");
    if (p.pid > 1 && env.find(mark + '\0') != std::string::npos) {
      ::kill(p.pid, SIGKILL);
    }
  }
}

}  // namespace tessera::e2e
