#include "api/job_relations.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(ArraySpecTest, RangesListsStepsAndThrottle) {
  StatusOr<ArraySpec> a = ParseArraySpec("0-999%50");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->indices.size(), 1000u);
  EXPECT_EQ(a->indices.front(), 0);
  EXPECT_EQ(a->indices.back(), 999);
  EXPECT_EQ(a->throttle, 50);
  EXPECT_EQ(ArraySpecText(*a), "0-999%50");

  StatusOr<ArraySpec> b = ParseArraySpec("7,1,3,5-6");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->indices, (std::vector<int64_t>{1, 3, 5, 6, 7}));
  EXPECT_EQ(ArraySpecText(*b), "1,3,5-7");
  EXPECT_EQ(ParseArraySpec(ArraySpecText(*b)).value(), *b);

  StatusOr<ArraySpec> c = ParseArraySpec("0-15:4");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->indices, (std::vector<int64_t>{0, 4, 8, 12}));
  EXPECT_EQ(c->throttle, 0);
  EXPECT_EQ(ArraySpecText(*c), "0-12:4");
}

// An array's text is stored with each element: a stepped range stays a stepped range
// (it was once written out index by index, 77 KB for 10,000 elements).
TEST(ArraySpecTest, StepsStayCompactAndReadBack) {
  StatusOr<ArraySpec> a = ParseArraySpec("0-3999999:400");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->indices.size(), 10000u);
  EXPECT_EQ(ArraySpecText(*a), "0-3999600:400");
  EXPECT_EQ(ParseArraySpec(ArraySpecText(*a)).value(), *a);
  for (const char* text : {"1,2,4,6,8,9,10,20,30", "5,7", "0-8:2,9-11", "0,3,6,7,8,100%3",
                           "0-3000:3,1-3001:3"}) {
    StatusOr<ArraySpec> s = ParseArraySpec(text);
    ASSERT_TRUE(s.ok()) << text << ": " << s.status().ToString();
    EXPECT_EQ(ParseArraySpec(ArraySpecText(*s)).value(), *s) << text << " -> " << ArraySpecText(*s);
  }
  EXPECT_EQ(ArraySpecText(ParseArraySpec("1,2,4,6,8,9,10").value()), "1-2,4,6,8-10");
  EXPECT_EQ(ArraySpecText(ParseArraySpec("5,7").value()), "5,7");
}

TEST(ArraySpecTest, BadSpecsSayWhy) {
  EXPECT_NE(ParseArraySpec("").status().message().find("needs indices"), std::string::npos);
  EXPECT_NE(ParseArraySpec("5-2").status().message().find("ends before it starts"),
            std::string::npos);
  EXPECT_NE(ParseArraySpec("1,1").status().message().find("repeated"), std::string::npos);
  EXPECT_NE(ParseArraySpec("0-9%0").status().message().find("throttle"), std::string::npos);
  EXPECT_NE(ParseArraySpec("a-b").status().message().find("not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(ParseArraySpec("0-20000").status().message().find("at most 10000"),
            std::string::npos);
  EXPECT_NE(ParseArraySpec("4000001").status().message().find("up to"), std::string::npos);
  EXPECT_FALSE(ParseArraySpec("0-4:0").ok());
  EXPECT_FALSE(ParseArraySpec("-3").ok());
}

TEST(DependencySpecTest, KindsJobsAndElements) {
  StatusOr<DependencySpec> d = ParseDependencySpec("afterok:12:13_2,singleton");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->items.size(), 2u);
  EXPECT_FALSE(d->any);
  EXPECT_EQ(d->items[0].kind, DependencyKind::kAfterOk);
  EXPECT_EQ(d->items[0].jobs, (std::vector<JobRef>{{12, -1}, {13, 2}}));
  EXPECT_EQ(d->items[1].kind, DependencyKind::kSingleton);
  EXPECT_EQ(DependencySpecText(*d), "afterok:12:13_2,singleton");

  StatusOr<DependencySpec> any = ParseDependencySpec("afternotok:4?after:5");
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(any->any);
  EXPECT_EQ(DependencySpecText(*any), "afternotok:4?after:5");
}

TEST(DependencySpecTest, BadSpecsSayWhy) {
  EXPECT_NE(ParseDependencySpec("afterwards:3").status().message().find("not a dependency"),
            std::string::npos);
  EXPECT_NE(ParseDependencySpec("afterok").status().message().find("name its jobs"),
            std::string::npos);
  EXPECT_NE(ParseDependencySpec("singleton:3").status().message().find("no jobs"),
            std::string::npos);
  EXPECT_NE(ParseDependencySpec("afterok:3,afterany:4?after:5").status().message().find("either"),
            std::string::npos);
  EXPECT_NE(ParseDependencySpec("afterok:3+10").status().message().find("not supported"),
            std::string::npos);
  EXPECT_FALSE(ParseDependencySpec("afterok:0").ok());
  EXPECT_FALSE(ParseDependencySpec("afterok:x").ok());
}

TEST(DependencyEvaluationTest, EachKindOverItsTargets) {
  const DependencyTarget pending{};
  const DependencyTarget running{true, false, false};
  const DependencyTarget ok{true, true, true};
  const DependencyTarget failed{true, true, false};
  const DependencyTarget cancelled_early{false, true, false};
  using K = DependencyKind;
  using S = DependencyState;
  EXPECT_EQ(EvaluateDependency(K::kAfterOk, {ok, ok}), S::kSatisfied);
  EXPECT_EQ(EvaluateDependency(K::kAfterOk, {ok, running}), S::kWaiting);
  EXPECT_EQ(EvaluateDependency(K::kAfterOk, {running, failed}), S::kNever);
  EXPECT_EQ(EvaluateDependency(K::kAfterNotOk, {failed, cancelled_early}), S::kSatisfied);
  EXPECT_EQ(EvaluateDependency(K::kAfterNotOk, {ok}), S::kNever);
  EXPECT_EQ(EvaluateDependency(K::kAfterAny, {ok, failed}), S::kSatisfied);
  EXPECT_EQ(EvaluateDependency(K::kAfterAny, {ok, running}), S::kWaiting);
  EXPECT_EQ(EvaluateDependency(K::kAfter, {running, cancelled_early}), S::kSatisfied);
  EXPECT_EQ(EvaluateDependency(K::kAfter, {pending}), S::kWaiting);
}

}  // namespace
}  // namespace tessera

#include "api/job_codec.h"

namespace tessera {
namespace {

TEST(JobFileRelationsTest, ReadBackEqualAndChecked) {
  const GpuCatalog& catalog = GpuCatalog::Default();
  StatusOr<JobSubmission> job = ParseJobYaml(
      "command: [true]\narray: '9,0-3%2'\ndependency: afterok:4_1\nhold: true\n"
      "priority: high\n",
      catalog);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->array, "0-3,9%2");
  EXPECT_EQ(job->array_index, -1);
  EXPECT_EQ(job->dependency, "afterok:4_1");
  EXPECT_TRUE(job->hold);
  EXPECT_EQ(job->priority_class, "high");
  EXPECT_EQ(job->spec.priority, 0);
  JobSubmission element = *job;
  element.array_index = 9;
  StatusOr<JobSubmission> back =
      JobSubmissionFromJson(JobSubmissionToJson(element, catalog), catalog);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, element);

  StatusOr<JobSubmission> signalled =
      ParseJobYaml("command: [true]\nsignal: {name: sigusr2, before: 90s}\n", catalog);
  ASSERT_TRUE(signalled.ok()) << signalled.status().ToString();
  EXPECT_EQ(signalled->limit_signal, 12);
  EXPECT_EQ(signalled->limit_signal_before, 90'000'000);
  EXPECT_EQ(JobSubmissionToJson(*signalled, catalog)["signal"],
            nlohmann::json({{"name", "USR2"}, {"before", "1m30s"}}));
  EXPECT_EQ(ParseJobYaml("command: [true]\nsignal: {name: 10}\n", catalog)->limit_signal_before,
            60'000'000);
  EXPECT_NE(ParseJobYaml("command: [true]\nsignal: {name: BOOM}\n", catalog).status().message().find(
                "signal.name: 'BOOM' is not a signal"),
            std::string::npos);
  EXPECT_NE(ParseJobYaml("command: [true]\narray: 0-3\narray_index: 7\n", catalog)
                .status()
                .message()
                .find("array_index: is not one of"),
            std::string::npos);
  EXPECT_NE(ParseJobYaml("command: [true]\narray_index: 1\n", catalog).status().message().find(
                "only on the elements"),
            std::string::npos);
  EXPECT_NE(ParseJobYaml("command: [true]\ndependency: soon:3\n", catalog)
                .status()
                .message()
                .find("dependency: 'soon:3' is not a dependency"),
            std::string::npos);
  EXPECT_NE(ParseJobYaml("command: [true]\narray: 3-1\n", catalog).status().message().find("array:"),
            std::string::npos);
  EXPECT_NE(ParseJobYaml("command: [true]\npriority: high\npriority_class: low\n", catalog)
                .status()
                .message()
                .find("priority_class: names"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera
