#include "sim/job_trace.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/testing/time_units.h"
#include "sim/testing/sim_testing.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

using ::tessera::testing::kSecond;
using ::tessera::testing::TracesDir;

// Fixture files in a scratch directory.
class JobTraceTest : public ::tessera::testing::ScratchDirTest {};

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Expects an InvalidArgument whose message holds `part` (e.g. "file.csv:3:").
template <typename T>
void ExpectInvalid(const StatusOr<T>& got, const std::string& part) {
  ASSERT_FALSE(got.ok()) << "expected an error holding '" << part << "'";
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << got.status().ToString();
  EXPECT_TRUE(Contains(got.status().message(), part)) << got.status().ToString();
}

// --- Philly ----------------------------------------------------------------------------

TEST_F(JobTraceTest, PhillySortsStablyAndSkipsBlankAndEmptyRows) {
  std::string path = Write("philly.csv",
                           "timestamp,duration,num_gpus,gpu_time,cluster\r\n"
                           "2017-10-09 07:01:55,66.0,1,66.0,vc-a\r\n"
                           "2017-10-09 07:00:00,10.5,2,21.0,vc-b\r\n"
                           "\r\n"
                           "2017-10-09 07:01:55,0.0,4,0.0,vc-a\r\n"          // zero duration
                           "2017-10-09 07:01:55,5,0,0,vc-c\r\n"              // zero GPUs
                           "2017-10-09 07:01:55, 0.000001 ,1,1e-6,vc-c\r\n"  // one microsecond
                           "   \n");
  StatusOr<JobTrace> t = ReadPhillyTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->name, "philly");
  EXPECT_EQ(t->skipped, 2);
  ASSERT_EQ(t->jobs.size(), 3u);
  const TraceJob& first = t->jobs[0];
  EXPECT_EQ(first.name, "philly-3");
  EXPECT_EQ(first.submit, 0);
  EXPECT_EQ(first.duration, 10'500'000);
  EXPECT_EQ(first.gpus, 2);
  EXPECT_EQ(first.tenant, "vc-b");
  EXPECT_EQ(first.application, "");
  // Ties keep file order: line 2 before line 7.
  EXPECT_EQ(t->jobs[1].name, "philly-2");
  EXPECT_EQ(t->jobs[1].submit, 115 * kSecond);
  EXPECT_EQ(t->jobs[1].duration, 66 * kSecond);
  EXPECT_EQ(t->jobs[1].tenant, "vc-a");
  EXPECT_EQ(t->jobs[2].name, "philly-7");
  EXPECT_EQ(t->jobs[2].submit, 115 * kSecond);
  EXPECT_EQ(t->jobs[2].duration, 1);
  EXPECT_EQ(t->jobs[2].tenant, "vc-c");
}

TEST_F(JobTraceTest, PhillyTimestampsAreUtcCalendarDates) {
  // Across a leap day, a year end and a century leap year (2000), and the epoch.
  std::string path = Write("dates.csv",
                           "timestamp,duration,num_gpus,gpu_time,cluster\n"
                           "1970-01-01 00:00:00,1,1,1,a\n"
                           "2016-02-28 23:00:00,1,1,1,a\n"
                           "2016-03-01 00:00:00,1,1,1,a\n"
                           "1999-12-31 23:59:59,1,1,1,a\n"
                           "2000-03-01 00:00:00,1,1,1,a\n");
  StatusOr<JobTrace> t = ReadPhillyTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  std::map<std::string, Micros> at;
  for (const TraceJob& j : t->jobs) {
    at[j.name] = j.submit;
  }
  EXPECT_EQ(at["philly-2"], 0);
  EXPECT_EQ(at["philly-5"], 946684799 * kSecond);   // date -u -d '1999-12-31 23:59:59' +%s
  EXPECT_EQ(at["philly-6"], 951868800 * kSecond);   // 2000-03-01
  EXPECT_EQ(at["philly-3"], 1456700400 * kSecond);  // 2016-02-28 23:00
  EXPECT_EQ(at["philly-4"] - at["philly-3"], 25 * 3600 * kSecond);  // 2016-02-29 exists
}

TEST_F(JobTraceTest, PhillyErrorsNameFileAndLine) {
  const std::string header = "timestamp,duration,num_gpus,gpu_time,cluster\n";
  const std::string ok_row = "2017-10-09 07:01:55,66.0,1,66.0,a\n";
  ExpectInvalid(ReadPhillyTrace(Write("a.csv", header + ok_row + "2017-02-29 00:00:00,1,1,1,a\n")),
                "a.csv:3: column 'timestamp'");
  ExpectInvalid(ReadPhillyTrace(Write("b.csv", header + "\n" + "2017/10/09 07:01:55,1,1,1,a\n")),
                "b.csv:3: column 'timestamp'");
  ExpectInvalid(ReadPhillyTrace(Write("c.csv", header + ok_row + "2017-10-09 25:00:00,1,1,1,a\n")),
                "c.csv:3:");
  ExpectInvalid(
      ReadPhillyTrace(Write("d.csv", header + ok_row + "2017-10-09 07:01:55,abc,1,1,a\n")),
      "d.csv:3: column 'duration': expected a number, got 'abc'");
  ExpectInvalid(ReadPhillyTrace(Write("e.csv", header + "2017-10-09 07:01:55,-3,1,1,a\n")),
                "e.csv:2: column 'duration'");
  ExpectInvalid(ReadPhillyTrace(Write("f.csv", header + "2017-10-09 07:01:55,3,-1,1,a\n")),
                "f.csv:2: column 'num_gpus'");
  ExpectInvalid(ReadPhillyTrace(Write("g.csv", header + "2017-10-09 07:01:55,3,1.5,1,a\n")),
                "g.csv:2: column 'num_gpus'");
  ExpectInvalid(
      ReadPhillyTrace(Write("h.csv", header + ok_row + ok_row + "2017-10-09 07:01:55,3,1\n")),
      "h.csv:4: 3 fields, header has 5");
  ExpectInvalid(ReadPhillyTrace(Write("i.csv", "timestamp,duration,gpus,cluster\n" + ok_row)),
                "has no column 'num_gpus'");
  ExpectInvalid(ReadPhillyTrace(Write("j.csv", "\n\n")), "is empty");
  ExpectInvalid(ReadPhillyTrace(Write("k.csv", header + "2017-10-09 07:01:55,nan,1,1,a\n")),
                "k.csv:2: column 'duration'");
  StatusOr<JobTrace> missing = ReadPhillyTrace(dir_ + "/no-such.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(JobTraceTest, RealPhillyTrace) {
  const std::string dir = TracesDir("sia/traces");
  ASSERT_FALSE(dir.empty());
  StatusOr<JobTrace> t = ReadPhillyTrace(dir + "/philly.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // 82,247 rows and one blank line at the end; no row has zero GPUs or duration.
  EXPECT_EQ(t->skipped, 0);
  EXPECT_EQ(t->jobs.size() + static_cast<size_t>(t->skipped), 82'247u);

  // The earliest rows, computed from the file (line numbers count the header as 1):
  //   31568: 2017-09-04 10:30:41,2240194.0,8,17921552.0,7f04ca
  //   54651: 2017-09-07 03:58:57,3256045.0,1,...,6214e9
  //    1986: 2017-09-07 09:57:50,2643038.0,1,...,6214e9
  //   54762: 2017-09-07 10:14:53,3219826.0,1,...,6214e9
  //   73749: 2017-09-07 10:20:03,2887527.0,1,...,6214e9
  struct Want {
    const char* name;
    Micros submit_s;
    Micros duration_s;
    int gpus;
    const char* tenant;
  };
  const Want want[] = {
      {"philly-31568", 0, 2240194, 8, "7f04ca"},
      {"philly-54651", 235696, 3256045, 1, "6214e9"},
      {"philly-1986", 257229, 2643038, 1, "6214e9"},
      {"philly-54762", 258252, 3219826, 1, "6214e9"},
      {"philly-73749", 258562, 2887527, 1, "6214e9"},
  };
  ASSERT_GE(t->jobs.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(t->jobs[i].name, want[i].name);
    EXPECT_EQ(t->jobs[i].submit, want[i].submit_s * kSecond);
    EXPECT_EQ(t->jobs[i].duration, want[i].duration_s * kSecond);
    EXPECT_EQ(t->jobs[i].gpus, want[i].gpus);
    EXPECT_EQ(t->jobs[i].tenant, want[i].tenant);
  }
  // The last submission: line 62255, 2017-12-22 08:02:11.
  EXPECT_EQ(t->jobs.back().submit, 9'408'690 * kSecond);

  std::set<std::string> tenants;
  int64_t max_gpus = 0;
  double gpu_seconds = 0;
  for (size_t i = 0; i < t->jobs.size(); ++i) {
    const TraceJob& j = t->jobs[i];
    tenants.insert(j.tenant);
    max_gpus = std::max<int64_t>(max_gpus, j.gpus);
    gpu_seconds += static_cast<double>(j.gpus) * static_cast<double>(j.duration) / kSecond;
    if (i > 0) {
      ASSERT_LE(t->jobs[i - 1].submit, j.submit) << "not sorted at " << i;
    }
    ASSERT_GT(j.duration, 0);
    ASSERT_GE(j.gpus, 1);
  }
  EXPECT_EQ(tenants.size(), 15u);
  EXPECT_TRUE(tenants.contains("6214e9"));
  EXPECT_TRUE(tenants.contains("795a4c"));
  EXPECT_EQ(max_gpus, 128);
  EXPECT_DOUBLE_EQ(gpu_seconds, 3'521'082'502.0);
}

// --- Tiresias --------------------------------------------------------------------------

TEST_F(JobTraceTest, TiresiasSynthetic) {
  std::string path = Write("jobs.csv",
                           "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
                           "7,2,100,10,vgg19,30,5\n"
                           "8,4,40,10,resnet50,12.5,5\n"
                           ",1,40,10,alexnet,0,5\n");
  StatusOr<JobTrace> t = ReadTiresiasTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->name, "tiresias");
  EXPECT_EQ(t->skipped, 1);
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].name, "8");
  EXPECT_EQ(t->jobs[0].submit, 0);
  EXPECT_EQ(t->jobs[0].duration, 12'500'000);
  EXPECT_EQ(t->jobs[0].gpus, 4);
  EXPECT_EQ(t->jobs[0].application, "resnet50");
  EXPECT_EQ(t->jobs[0].tenant, "");
  EXPECT_EQ(t->jobs[1].name, "7");
  EXPECT_EQ(t->jobs[1].submit, 60 * kSecond);

  ExpectInvalid(ReadTiresiasTrace(Write("bad.csv",
                                        "job_id,num_gpu,submit_time,iterations,model_name,"
                                        "duration,interval\n"
                                        "1,1,0,1,vgg,10,1\n"
                                        "2,x,0,1,vgg,10,1\n")),
                "bad.csv:3: column 'num_gpu'");
  ExpectInvalid(ReadTiresiasTrace(Write("short.csv", "job_id,num_gpu,submit_time\n1,1,0\n")),
                "has no column 'duration'");
}

TEST_F(JobTraceTest, RealTiresiasTrace) {
  const std::string dir = TracesDir("tiresias");
  ASSERT_FALSE(dir.empty());
  StatusOr<JobTrace> t = ReadTiresiasTrace(dir + "/60_job.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 60u);
  EXPECT_EQ(t->skipped, 0);
  // 0,1,0,606,vgg19,164,30 and 1,8,30,133,vgg11,147,23
  EXPECT_EQ(t->jobs[0].name, "0");
  EXPECT_EQ(t->jobs[0].gpus, 1);
  EXPECT_EQ(t->jobs[0].duration, 164 * kSecond);
  EXPECT_EQ(t->jobs[0].application, "vgg19");
  EXPECT_EQ(t->jobs[1].submit, 30 * kSecond);
  EXPECT_EQ(t->jobs[1].gpus, 8);
  std::map<int, int> by_gpus;
  for (const TraceJob& j : t->jobs) {
    ++by_gpus[j.gpus];
  }
  EXPECT_EQ(by_gpus, (std::map<int, int>{{1, 30}, {2, 10}, {4, 10}, {8, 10}}));
}

// --- Pollux ----------------------------------------------------------------------------

TEST_F(JobTraceTest, PolluxSyntheticProfilesPickNearestPoints) {
  Write("profiles/toy/scalability.csv",
        "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
        "2,4,10,0.5,0.1\n"
        "1,4,10,0.4,0.1\n"  // same point on fewer nodes: preferred
        "1,4,100,2.0,0.0\n"
        "1,2,25,9.0,0.0\n"  // nearer local batch for 2 replicas, but not 4
        "1,8,10,0.3,0.0\n");
  Write("profiles/toy/validation-64.csv", "progress,iteration,metric\n1,10,0.5\n2,100,0.9\n");
  Write("profiles/toy/validation-256.csv", "progress,iteration,metric\n1,500,0.5\n2,2000,0.9\n");
  Write("profiles/toy/validation-notes.csv", "not,a,profile\n");
  std::string path = Write("workload.csv",
                           "name,time,application,num_replicas,batch_size\n"
                           "late,300,toy,4,100\n"   // local 25 -> 10 (log 0.92 vs 1.39)
                           "early,100,toy,3,200\n"  // 3 replicas: 4 is nearer than 2
                           "big,200,toy,4,400\n"    // local 100: 2.0 s; batch 400 -> 256
                           "tiny,250,toy,8,8\n"     // 100 x 0.3 s = 30 s
                           "none,250,toy,0,8\n");   // no replicas: skipped
  StatusOr<JobTrace> t = ReadPolluxWorkload(path, dir_ + "/profiles");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->name, "pollux");
  EXPECT_EQ(t->skipped, 1);
  ASSERT_EQ(t->jobs.size(), 4u);
  std::map<std::string, TraceJob> by_name;
  for (const TraceJob& j : t->jobs) {
    by_name[j.name] = j;
  }
  EXPECT_EQ(t->jobs[0].name, "early");
  // batch 100 -> validation-64 (100 iterations); (4, 25) -> (4, 10) on 1 node: 0.5 s.
  EXPECT_EQ(by_name["late"].duration, 50 * kSecond);
  EXPECT_EQ(by_name["late"].submit, 200 * kSecond);
  EXPECT_EQ(by_name["late"].gpus, 4);
  EXPECT_EQ(by_name["late"].application, "toy");
  // batch 200 -> validation-256 (2000); (3, 66.7) -> replicas 4, local 100: 2.0 s.
  EXPECT_EQ(by_name["early"].duration, 4000 * kSecond);
  EXPECT_EQ(by_name["early"].gpus, 3);
  EXPECT_EQ(by_name["big"].duration, 4000 * kSecond);
  EXPECT_EQ(by_name["tiny"].duration, 30 * kSecond);

  // At least one second.
  Write("profiles/fast/scalability.csv",
        "num_nodes,num_replicas,local_bsz,step_time,sync_time\n1,1,1,0.001,0\n");
  Write("profiles/fast/validation-1.csv", "progress,iteration\n1,5\n");
  StatusOr<JobTrace> fast = ReadPolluxWorkload(
      Write("fast.csv", "name,time,application,num_replicas,batch_size\nf,0,fast,1,1\n"),
      dir_ + "/profiles");
  ASSERT_TRUE(fast.ok()) << fast.status().ToString();
  EXPECT_EQ(fast->jobs.at(0).duration, kSecond);
}

TEST_F(JobTraceTest, PolluxErrorsNameFileAndLine) {
  Write("profiles/toy/scalability.csv",
        "num_nodes,num_replicas,local_bsz,step_time,sync_time\n1,1,8,0.1,0\n1,1,oops,0.1,0\n");
  Write("profiles/toy/validation-8.csv", "progress,iteration\n1,5\n");
  const std::string header = "name,time,application,num_replicas,batch_size\n";
  const std::string profiles = dir_ + "/profiles";
  ExpectInvalid(ReadPolluxWorkload(Write("a.csv", header + "a,0,toy,1,8\n"), profiles),
                "scalability.csv:3: column 'local_bsz'");
  ExpectInvalid(ReadPolluxWorkload(Write("a.csv", header + "a,0,toy,1,8\n"), profiles),
                "a.csv:2: column 'application'");
  ExpectInvalid(ReadPolluxWorkload(Write("b.csv", header + "a,0,toy,1,0\n"), profiles),
                "b.csv:2: column 'batch_size'");
  ExpectInvalid(ReadPolluxWorkload(Write("c.csv", header + "\na,0,../toy,1,8\n"), profiles),
                "c.csv:3: column 'application'");
  StatusOr<JobTrace> unknown =
      ReadPolluxWorkload(Write("d.csv", header + "a,0,nosuch,1,8\n"), profiles);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(unknown.status().message(), "d.csv:2: column 'application'"))
      << unknown.status().ToString();
  ExpectInvalid(ReadPolluxWorkload(Write("e.csv", header + "a,soon,toy,1,8\n"), profiles),
                "e.csv:2: column 'time'");
}

TEST_F(JobTraceTest, RealPolluxWorkloadDurationFromProfiles) {
  const std::string workloads = TracesDir("pollux-adaptdl-workloads/workloads");
  const std::string profiles = TracesDir("sia/traces");
  ASSERT_FALSE(workloads.empty());
  ASSERT_FALSE(profiles.empty());
  StatusOr<JobTrace> t = ReadPolluxWorkload(workloads + "/workload-1.csv", profiles);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->jobs.size(), 160u);
  EXPECT_EQ(t->skipped, 0);
  // cifar10-0,107,cifar10,6,2048 is the first submission. By hand from the profiles:
  // validation-2048.csv ends at iteration 3178; local batch 2048/6 = 341.3, and among
  // scalability.csv's 6-replica rows local_bsz 363 is nearest (log 0.062 vs 0.284 for
  // 257): "6,6,363,0.2707310676574707,0.004500848007202149", so a step is 0.27523191566
  // s and 3178 steps take 874.687028 s.
  const TraceJob& j = t->jobs.at(0);
  EXPECT_EQ(j.name, "cifar10-0");
  EXPECT_EQ(j.submit, 0);
  EXPECT_EQ(j.gpus, 6);
  EXPECT_EQ(j.application, "cifar10");
  EXPECT_EQ(j.tenant, "");
  EXPECT_EQ(j.duration, 874'687'028);
  // ncf-2,135,ncf,1,32768: no 1-replica row, so 6 replicas at the nearest local batch
  // (5803): 1548 iterations x (0.02956593566470676 + 0.02016351110670302) s.
  const TraceJob& ncf = t->jobs.at(2);
  EXPECT_EQ(ncf.name, "ncf-2");
  EXPECT_EQ(ncf.submit, 28 * kSecond);
  EXPECT_EQ(ncf.duration, 76'981'184);
  for (const TraceJob& job : t->jobs) {
    EXPECT_GE(job.duration, kSecond) << job.name;
  }

  // Sia's copy of the Philly-derived workloads reads with the same profiles.
  StatusOr<JobTrace> sia =
      ReadPolluxWorkload(TracesDir("sia/workloads/philly") + "/workload-1.csv", profiles);
  ASSERT_TRUE(sia.ok()) << sia.status().ToString();
  EXPECT_FALSE(sia->jobs.empty());
}

// --- ReadJobTrace ----------------------------------------------------------------------

TEST_F(JobTraceTest, ReadJobTraceDispatchesOnKind) {
  const std::string root = TracesDir("");
  ASSERT_FALSE(root.empty());
  StatusOr<JobTrace> tiresias = ReadJobTrace("tiresias:" + root + "/tiresias/60_job.csv", root);
  ASSERT_TRUE(tiresias.ok()) << tiresias.status().ToString();
  EXPECT_EQ(tiresias->name, "tiresias");
  EXPECT_EQ(tiresias->jobs.size(), 60u);

  StatusOr<JobTrace> pollux =
      ReadJobTrace("pollux:" + root + "/pollux-adaptdl-workloads/workloads/workload-2.csv", root);
  ASSERT_TRUE(pollux.ok()) << pollux.status().ToString();
  EXPECT_EQ(pollux->name, "pollux");

  std::string philly = Write("p.csv",
                             "timestamp,duration,num_gpus,gpu_time,cluster\n"
                             "2017-10-09 07:01:55,66.0,1,66.0,a\n");
  for (const std::string& spec : {"philly:" + philly, philly}) {
    StatusOr<JobTrace> t = ReadJobTrace(spec, root);
    ASSERT_TRUE(t.ok()) << spec << ": " << t.status().ToString();
    EXPECT_EQ(t->name, "philly");
    EXPECT_EQ(t->jobs.size(), 1u);
  }
  ExpectInvalid(ReadJobTrace("phily:" + philly, root), "unknown trace kind 'phily'");
  StatusOr<JobTrace> missing = ReadJobTrace("tiresias:" + dir_ + "/none.csv", root);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// --- load ------------------------------------------------------------------------------

JobTrace Synthetic(const std::vector<std::pair<Micros, Micros>>& submit_duration, int gpus) {
  JobTrace t;
  t.name = "synthetic";
  for (const auto& [submit, duration] : submit_duration) {
    TraceJob j;
    j.name = "j" + std::to_string(t.jobs.size());
    j.submit = submit;
    j.duration = duration;
    j.gpus = gpus;
    t.jobs.push_back(j);
  }
  return t;
}

TEST_F(JobTraceTest, OfferedLoadIsDemandOverCapacityOfTheSpan) {
  // 3 jobs x 2 GPUs x 100 s = 600 GPU-s over 4 GPUs x 300 s.
  JobTrace t = Synthetic(
      {{0, 100 * kSecond}, {100 * kSecond, 100 * kSecond}, {300 * kSecond, 100 * kSecond}}, 2);
  EXPECT_DOUBLE_EQ(OfferedLoad(t, 4), 0.5);
  EXPECT_EQ(OfferedLoad(t, 0), 0);
  EXPECT_EQ(OfferedLoad(JobTrace{}, 4), 0);
  EXPECT_EQ(OfferedLoad(Synthetic({{5, kSecond}, {5, kSecond}}, 1), 4), 0);  // zero span
}

TEST_F(JobTraceTest, ScaleToLoadSynthetic) {
  JobTrace t = Synthetic(
      {{0, 100 * kSecond}, {100 * kSecond, 100 * kSecond}, {300 * kSecond, 100 * kSecond}}, 2);
  EXPECT_DOUBLE_EQ(ScaleToLoad(&t, 4, 2.0), 0.25);
  EXPECT_EQ(t.jobs[1].submit, 25 * kSecond);
  EXPECT_EQ(t.jobs[2].submit, 75 * kSecond);
  EXPECT_EQ(t.jobs[2].duration, 100 * kSecond);  // durations unchanged
  EXPECT_DOUBLE_EQ(OfferedLoad(t, 4), 2.0);
  EXPECT_DOUBLE_EQ(ScaleToLoad(&t, 4, 0.5), 4.0);
  EXPECT_EQ(t.jobs[2].submit, 300 * kSecond);

  // Nothing to scale: factor 1 and the trace untouched.
  JobTrace empty;
  EXPECT_EQ(ScaleToLoad(&empty, 4, 1.0), 1.0);
  JobTrace same = Synthetic({{7, kSecond}, {7, kSecond}}, 1);
  EXPECT_EQ(ScaleToLoad(&same, 4, 1.0), 1.0);
  EXPECT_EQ(same.jobs[1].submit, 7);
  EXPECT_EQ(ScaleToLoad(&t, 4, 0.0), 1.0);
  EXPECT_EQ(ScaleToLoad(&t, 4, -1.0), 1.0);
  EXPECT_EQ(t.jobs[2].submit, 300 * kSecond);
}

TEST_F(JobTraceTest, ScaleRealPhillyToTargetLoad) {
  const std::string dir = TracesDir("sia/traces");
  ASSERT_FALSE(dir.empty());
  StatusOr<JobTrace> t = ReadPhillyTrace(dir + "/philly.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  constexpr int64_t kGpus = 2816;  // the philly-vc preset
  // 3,521,082,502 GPU-s over 2816 GPUs x 9,408,690 s.
  const double before = OfferedLoad(*t, kGpus);
  EXPECT_NEAR(before, 3'521'082'502.0 / (2816.0 * 9'408'690.0), 1e-12);
  for (double target : {0.8, 1.5, 0.05}) {
    SCOPED_TRACE(target);
    const Micros first_duration = t->jobs[0].duration;
    const double factor = ScaleToLoad(&*t, kGpus, target);
    EXPECT_GT(factor, 0);
    EXPECT_NEAR(OfferedLoad(*t, kGpus), target, 1e-9);
    EXPECT_EQ(t->jobs[0].submit, 0);
    EXPECT_EQ(t->jobs[0].duration, first_duration);
    for (size_t i = 1; i < t->jobs.size(); ++i) {
      ASSERT_LE(t->jobs[i - 1].submit, t->jobs[i].submit);
    }
  }
}

}  // namespace
}  // namespace tessera
