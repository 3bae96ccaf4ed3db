// The pure part of validation runs: definitions, node selection, due times, the result
// lines a check prints, and the baseline and regression maths.
#include "server/modules/validation.h"

#include <gtest/gtest.h>

namespace tessera {
// Named, not anonymous: its kHour would meet controller_fixture.h's in a unity batch.
namespace validation_test {

constexpr Micros kHour = 3600LL * 1'000'000;

TEST(ValidationCheckTest, ParsesFieldsAndNamesTheBadOne) {
  auto c = ValidationCheckFromJson({{"name", "gpu-burn"},
                                    {"command", "gpu_burn 60"},
                                    {"every", "12h"},
                                    {"nodes", "rack=r1"},
                                    {"threshold", "15%"},
                                    {"metric_direction", "lower"},
                                    {"timeout", "5m"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->every, 12 * kHour);
  EXPECT_EQ(c->timeout, 5 * 60'000'000LL);
  EXPECT_DOUBLE_EQ(c->threshold_percent, 15.0);
  EXPECT_FALSE(c->higher_is_better);
  EXPECT_EQ(c->nodes, "rack=r1");
  // Round trip through the stored form.
  auto back = ValidationCheckFromJson(ValidationCheckToJson(*c));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->every, c->every);
  EXPECT_DOUBLE_EQ(back->threshold_percent, 15.0);
  EXPECT_FALSE(back->higher_is_better);

  struct Bad {
    nlohmann::json body;
    std::string field;
  };
  const nlohmann::json base = {{"name", "x"}, {"command", "true"}};
  std::vector<Bad> bad = {
      {{{"command", "true"}}, "name"},
      {{{"name", "a/b"}, {"command", "true"}}, "name"},
      {{{"name", "x"}}, "command"},
      {{{"name", "x"}, {"command", "true"}, {"every", "often"}}, "every"},
      {{{"name", "x"}, {"command", "true"}, {"every", "10s"}}, "every"},
      {{{"name", "x"}, {"command", "true"}, {"threshold", "150%"}}, "threshold"},
      {{{"name", "x"}, {"command", "true"}, {"threshold", "ten"}}, "threshold"},
      {{{"name", "x"}, {"command", "true"}, {"metric_direction", "up"}}, "metric_direction"},
      {{{"name", "x"}, {"command", "true"}, {"nodes", "a,,b"}}, "nodes"},
      {{{"name", "x"}, {"command", "true"}, {"nodes", "=v"}}, "nodes"},
  };
  for (const Bad& b : bad) {
    auto r = ValidationCheckFromJson(b.body);
    ASSERT_FALSE(r.ok()) << b.body.dump();
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind(b.field + ":", 0), 0U) << r.status().message();
  }
  EXPECT_TRUE(ValidationCheckFromJson(base).ok());
}

TEST(ValidationCheckTest, SelectsNodesByAllNamesOrLabel) {
  const std::vector<std::pair<std::string, std::string>> labels = {{"rack", "r1"}, {"zone", "a"}};
  EXPECT_TRUE(ValidationSelects("all", "n1", {}));
  EXPECT_TRUE(ValidationSelects("n0,n1", "n1", {}));
  EXPECT_FALSE(ValidationSelects("n0,n11", "n1", {}));
  EXPECT_TRUE(ValidationSelects("rack=r1", "n1", labels));
  EXPECT_FALSE(ValidationSelects("rack=r2", "n1", labels));
  EXPECT_FALSE(ValidationSelects("rack=r1", "n1", {}));
}

TEST(ValidationCheckTest, DueEveryIntervalFromTheLastStartOrCreation) {
  ValidationCheck c;
  c.every = 24 * kHour;
  c.created = 100 * kHour;
  EXPECT_EQ(ValidationDueAt(c, 0), 124 * kHour);            // never run: a period after creation
  EXPECT_EQ(ValidationDueAt(c, 130 * kHour), 154 * kHour);  // then a period after each start
}

TEST(ValidationOutputTest, KeepsOnlyWellFormedResultLines) {
  const std::string out =
      "starting burn\n"
      "{\"gpu\":0,\"metric\":\"matmul_tflops\",\"value\":312.4}\n"
      "  {\"gpu\": 1, \"metric\": \"matmul_tflops\", \"value\": 305}\r\n"
      "{\"gpu\":\"2\",\"metric\":\"x\",\"value\":1}\n"  // gpu not an integer
      "{\"gpu\":2,\"metric\":\"x\"}\n"                  // no value
      "{\"gpu\":2,\"metric\":\"x\",\"value\":\"1\"}\n"  // value not a number
      "{not json\n"
      "{\"gpu\":-1,\"metric\":\"x\",\"value\":1}\n"         // no such GPU
      "{\"gpu\":3,\"metric\":\"mem_bw\",\"value\":2.5e3}";  // no final newline
  std::vector<ValidationValue> v = ParseValidationOutput(out);
  ASSERT_EQ(v.size(), 3U);
  EXPECT_EQ(v[0].gpu, 0);
  EXPECT_EQ(v[0].metric, "matmul_tflops");
  EXPECT_DOUBLE_EQ(v[0].value, 312.4);
  EXPECT_EQ(v[1].gpu, 1);
  EXPECT_DOUBLE_EQ(v[1].value, 305);
  EXPECT_EQ(v[2].metric, "mem_bw");
  EXPECT_DOUBLE_EQ(v[2].value, 2500);
}

TEST(ValidationBaselineTest, FirstResultUntilFiveThenTheMedianOfTheLastFive) {
  EXPECT_FALSE(ValidationBaseline({}).has_value());
  EXPECT_DOUBLE_EQ(*ValidationBaseline({300}), 300);
  EXPECT_DOUBLE_EQ(*ValidationBaseline({300, 350, 10, 20}), 300);       // fewer than 5: the first
  EXPECT_DOUBLE_EQ(*ValidationBaseline({300, 350, 10, 20, 330}), 300);  // sorted: 10 20 300 330 350
  // Only the last five count: 1000 has aged out.
  EXPECT_DOUBLE_EQ(*ValidationBaseline({1000, 310, 320, 330, 340, 350}), 330);
}

TEST(ValidationBaselineTest, RegressionBeyondTheThresholdInEitherDirection) {
  const ValidationValue low{0, "matmul_tflops", 250.1};
  ValidationVerdict first = JudgeValidationValue(low, {}, 10, true);
  EXPECT_FALSE(first.baseline.has_value());
  EXPECT_FALSE(first.regressed);  // the first result sets the baseline

  ValidationVerdict v = JudgeValidationValue(low, {312.4}, 10, true);
  ASSERT_TRUE(v.baseline.has_value());
  EXPECT_DOUBLE_EQ(*v.baseline, 312.4);
  EXPECT_NEAR(v.change_percent, -19.94, 0.01);
  EXPECT_TRUE(v.regressed);
  EXPECT_EQ(RegressionReason("gpu-burn", v, 10),
            "validation gpu-burn: matmul_tflops 250.1 is 19.9 % below baseline 312.4 "
            "(threshold 10 %)");

  // Within the threshold: 9 % lower is not a regression at 10 %.
  EXPECT_FALSE(JudgeValidationValue({0, "m", 91}, {100}, 10, true).regressed);
  // Higher is fine when higher is better ...
  EXPECT_FALSE(JudgeValidationValue({0, "m", 150}, {100}, 10, true).regressed);
  // ... and a regression when lower is better (a latency).
  ValidationVerdict slow = JudgeValidationValue({0, "latency_us", 150}, {100}, 10, false);
  EXPECT_TRUE(slow.regressed);
  EXPECT_EQ(RegressionReason("nccl", slow, 10),
            "validation nccl: latency_us 150 is 50 % above baseline 100 (threshold 10 %)");
  EXPECT_FALSE(JudgeValidationValue({0, "latency_us", 50}, {100}, 10, false).regressed);
}

TEST(ValidationBookTest, HistoryHoldsPassingValuesOfThatGpuOnly) {
  ValidationBook book;
  auto run = [](Micros t, std::string outcome, std::vector<ValidationVerdict> results) {
    return ValidationRun{"burn", "n1", 1, t, std::move(outcome), 0, "", std::move(results)};
  };
  ValidationVerdict ok0{{0, "tflops", 300}, std::nullopt, 0, false};
  ValidationVerdict ok1{{1, "tflops", 290}, std::nullopt, 0, false};
  ValidationVerdict bad0{{0, "tflops", 200}, 300.0, -33, true};
  book.Record(run(1, "passed", {ok0, ok1}));
  book.Record(run(2, "regressed", {bad0, ok1}));
  book.Record(run(3, "failed", {ok0}));  // a failed run's values do not count
  EXPECT_EQ(book.History("burn", "n1", 0, "tflops"), (std::vector<double>{300}));
  EXPECT_EQ(book.History("burn", "n1", 1, "tflops"), (std::vector<double>{290, 290}));
  EXPECT_TRUE(book.History("burn", "n2", 0, "tflops").empty());

  for (int i = 0; i < 60; ++i) {
    book.Record(run(10 + i, "passed", {ok0}));
  }
  EXPECT_EQ(book.runs.at({"burn", "n1"}).size(), ValidationBook::kRunsKept);
  EXPECT_EQ(book.runs.at({"burn", "n1"}).front().time, 10 + 60 - 50);

  book.checks["burn"].name = "burn";
  book.checks["other"].name = "other";
  book.slots[{"burn", "n1"}].waiting_since = 5;
  book.slots[{"other", "n2"}].job = 9;
  EXPECT_TRUE(book.Holds("n1"));
  EXPECT_TRUE(book.Holds("n2"));
  EXPECT_FALSE(book.Holds("n3"));
  EXPECT_EQ(book.HeldFor("burn"), 1);
  EXPECT_EQ(book.HoldReason("n1"),
            "held for validation burn: takes no new work until its jobs end");
  EXPECT_EQ(book.HoldReason("n2"), "running validation other (job 9)");
  EXPECT_EQ(book.HoldReason("n3"), "");
}

TEST(ValidationRunTest, RoundTripsThroughItsStoredForm) {
  ValidationRun run{
      "burn",
      "n1",
      42,
      1234,
      "regressed",
      0,
      "why",
      {{{0, "tflops", 250}, 300.0, -16.7, true}, {{1, "tflops", 301}, std::nullopt, 0, false}}};
  auto back = ValidationRunFromJson(ValidationRunToJson(run));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->job, 42U);
  EXPECT_EQ(back->outcome, "regressed");
  ASSERT_EQ(back->results.size(), 2U);
  EXPECT_DOUBLE_EQ(*back->results[0].baseline, 300);
  EXPECT_TRUE(back->results[0].regressed);
  EXPECT_FALSE(back->results[1].baseline.has_value());
}

}  // namespace validation_test
}  // namespace tessera
