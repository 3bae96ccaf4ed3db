#include "cli/job_file_fields.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cluster_commands.h"
#include "cli/testing/fake_controller.h"

namespace tessera {
namespace {

using namespace ::tessera::cli_testing;  // NOLINT: the fake controller and its helpers
using nlohmann::json;

TEST(WithHoldIfUnfitTest, AddsTheFieldKeepingTheText) {
  const std::string yaml = "command: [true]  # run\n";
  StatusOr<std::string> y = WithHoldIfUnfit(yaml, false);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(*y, yaml + "hold_if_unfit: true\n");
  StatusOr<std::string> j = WithHoldIfUnfit(R"({"command": ["true"]})", true);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(*j, R"({"hold_if_unfit": true, "command": ["true"]})");
}

TEST(WithHoldIfUnfitTest, TheFlagWinsOverTheFilesFalse) {
  const std::string yaml = "command: [true]\nhold_if_unfit: false  # not now\nresources:\n"
                           "  gpus: 8\n";
  StatusOr<std::string> y = WithHoldIfUnfit(yaml, false);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(*y, "command: [true]\nhold_if_unfit: true  # not now\nresources:\n  gpus: 8\n");
  StatusOr<std::string> j =
      WithHoldIfUnfit(R"({"command": ["true"], "hold_if_unfit" : false})", true);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(json::parse(*j), json::parse(R"({"command": ["true"], "hold_if_unfit": true})"));
  // Already true: unchanged.
  const std::string already = "command: [true]\nhold_if_unfit: yes\n";
  EXPECT_EQ(WithHoldIfUnfit(already, false).value(), already);
}

TEST(WithHoldIfUnfitTest, AFileItCannotChangeIsAnErrorNotIgnored) {
  // Flow style: neither extended nor rewritten.
  for (const std::string& flow : {std::string("{command: [true]}\n"),
                                  std::string("{command: [true], hold_if_unfit: false}\n")}) {
    StatusOr<std::string> r = WithHoldIfUnfit(flow, false);
    ASSERT_FALSE(r.ok()) << flow;
    EXPECT_NE(r.status().message().find("hold_if_unfit: true in the file"), std::string::npos)
        << r.status().message();
  }
  // A JSON value other than false/null/0/a string is not guessed at.
  EXPECT_FALSE(WithHoldIfUnfit(R"({"command": ["true"], "hold_if_unfit": []})", true).ok());
}

TEST(WithHoldIfUnfitTest, SubmitSendsTheFlagOverTheFileOrFails) {
  char tmpl[] = "/tmp/tessera_cli_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/false.yaml") << "command: [true]\nhold_if_unfit: false\n";
  std::ofstream(dir + "/flow.yaml") << "# flow style\n{command: [true]}\n";
  FakeController ctl;
  ctl.Reply("POST", "/v1/jobs", 201, kRunningJob.dump());
  SubmitOptions o;
  o.hold_if_unfit = true;
  o.file = dir + "/false.yaml";
  std::ostringstream out, err;
  EXPECT_EQ(RunSubmit(ctl.Config(), o, out, err), 0) << err.str();
  ASSERT_EQ(ctl.requests().size(), 1u);
  EXPECT_TRUE(YAML::Load(ctl.requests()[0].body)["hold_if_unfit"].as<bool>())
      << ctl.requests()[0].body;
  o.file = dir + "/flow.yaml";
  std::ostringstream out2, err2;
  EXPECT_NE(RunSubmit(ctl.Config(), o, out2, err2), 0);
  EXPECT_NE(err2.str().find("--hold-if-unfit"), std::string::npos) << err2.str();
  EXPECT_EQ(ctl.requests().size(), 1u);  // nothing sent
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera
