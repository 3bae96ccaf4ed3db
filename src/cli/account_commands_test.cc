// The saved login (its file: where, modes, atomic writes, and where it stands among
// flags and the environment), `tessera login`/`logout`, `token` and `history` against the
// fake controller.
#include "cli/account_commands.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "cli/client_config_file.h"
#include "cli/testing/fake_controller.h"

namespace tessera {
namespace {

using namespace ::tessera::cli_testing;  // NOLINT: the fake controller and its helpers

class SavedLoginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/tessera-login-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    env_["HOME"] = dir_;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  EnvLookup Env() const {
    return [this](const std::string& name) -> std::optional<std::string> {
      auto it = env_.find(name);
      return it == env_.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
  }
  static int Mode(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return static_cast<int>(st.st_mode & 0777);
  }

  std::string dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(SavedLoginTest, LivesUnderXdgConfigHomeElseHomeDotConfig) {
  EXPECT_EQ(ClientConfigPath(Env()), dir_ + "/.config/tessera/config.json");
  env_["XDG_CONFIG_HOME"] = dir_ + "/xdg";
  EXPECT_EQ(ClientConfigPath(Env()), dir_ + "/xdg/tessera/config.json");
  env_.clear();
  EXPECT_EQ(ClientConfigPath(Env()), "");
}

TEST_F(SavedLoginTest, IsWrittenPrivateAndWholeAndKeepsOtherKeys) {
  const std::string path = ClientConfigPath(Env());
  EXPECT_FALSE(ReadSavedLogin(path).value().has_value());
  ASSERT_TRUE(WriteSavedLogin(path, {"http://a:1", "tok-1"}).ok());
  EXPECT_EQ(Mode(path), 0600);
  EXPECT_EQ(Mode(dir_ + "/.config/tessera"), 0700);
  EXPECT_EQ(ReadSavedLogin(path).value(), (SavedLogin{"http://a:1", "tok-1"}));
  // The Python client's shape: {"server", "token"}; a key of its own survives a login.
  {
    std::ofstream f(path);
    f << R"({"server": "http://a:1", "token": "tok-1", "python": {"timeout": 5}})";
  }
  ::chmod(path.c_str(), 0644);
  ASSERT_TRUE(WriteSavedLogin(path, {"http://b:2", ""}).ok());
  EXPECT_EQ(Mode(path), 0600);  // narrowed again
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["server"], "http://b:2");
  EXPECT_FALSE(j.contains("token"));
  EXPECT_EQ(j["python"]["timeout"], 5);
  // No temporary file is left beside it.
  size_t files = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator(dir_ + "/.config/tessera")) {
    ++files;
  }
  EXPECT_EQ(files, 1u);

  {
    std::ofstream f(path);
    f << "[1, 2]";
  }
  EXPECT_EQ(ReadSavedLogin(path).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SavedLoginTest, FlagsThenEnvironmentThenTheSavedLoginThenTheDefault) {
  ASSERT_TRUE(WriteSavedLogin(ClientConfigPath(Env()), {"http://saved:1", "tok-saved"}).ok());
  ConnectionFlags none;
  ClientConfig c = ResolveClientConfig(none, Env()).value();
  EXPECT_EQ(c.server, "http://saved:1");
  EXPECT_EQ(c.token, "tok-saved");

  env_["TESSERA_TOKEN"] = "tok-env";
  EXPECT_EQ(ResolveClientConfig(none, Env()).value().token, "tok-env");
  ConnectionFlags flags;
  flags.token = "tok-flag";
  EXPECT_EQ(ResolveClientConfig(flags, Env()).value().token, "tok-flag");
  env_.erase("TESSERA_TOKEN");

  // Another server: the saved token is not sent to it.
  env_["TESSERA_SERVER"] = "http://other:2";
  c = ResolveClientConfig(none, Env()).value();
  EXPECT_EQ(c.server, "http://other:2");
  EXPECT_EQ(c.token, "");
  flags = {};
  flags.server = "http://saved:1";
  EXPECT_EQ(ResolveClientConfig(flags, Env()).value().token, "tok-saved");

  env_.clear();  // no home: the default, no token
  c = ResolveClientConfig(none, Env()).value();
  EXPECT_EQ(c.server, kDefaultServer);
  EXPECT_EQ(c.token, "");
}

TEST_F(SavedLoginTest, LoginChecksTheTokenFirstAndLogoutDropsIt) {
  FakeController ctl;
  ctl.On("GET", "/v1/whoami", [](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Authorization") != "Bearer tok-alice") {
      res.status = 401;
      res.set_content(Error("Unauthenticated", "unknown token"), "application/json");
      return;
    }
    res.set_content(R"({"role": "tenant", "tenant": "team-a", "user": "alice", "name": "x"})",
                    "application/json");
  });
  ClientConfig config = ctl.Config();
  LoginOptions o;
  o.config_path = ClientConfigPath(Env());
  std::ostringstream out, err;
  auto given = [](std::string t) { return [t] { return std::optional<std::string>(t); }; };
  EXPECT_EQ(RunLogin(config, o, given("tok-wrong"), out, err), 4);
  EXPECT_FALSE(ReadSavedLogin(o.config_path).value().has_value());  // nothing saved

  EXPECT_EQ(RunLogin(config, o, given("tok-alice"), out, err), 0) << err.str();
  EXPECT_NE(out.str().find("as user alice of tenant team-a"), std::string::npos) << out.str();
  EXPECT_EQ(ReadSavedLogin(o.config_path).value(), (SavedLogin{config.server, "tok-alice"}));
  // A later command finds both.
  ClientConfig later = ResolveClientConfig({}, Env()).value();
  EXPECT_EQ(later.server, config.server);
  EXPECT_EQ(later.token, "tok-alice");

  // From a file, too.
  const std::string file = dir_ + "/token";
  std::ofstream(file) << "  tok-alice\n";
  o.token_file = file;
  EXPECT_EQ(RunLogin(config, o, given(""), out, err), 0) << err.str();

  out.str("");
  EXPECT_EQ(RunLogout(o.config_path, out, err), 0);
  EXPECT_EQ(ReadSavedLogin(o.config_path).value(), (SavedLogin{config.server, ""}));
  EXPECT_EQ(ResolveClientConfig({}, Env()).value().token, "");
  out.str("");
  EXPECT_EQ(RunLogout(o.config_path, out, err), 0);
  EXPECT_EQ(out.str(), "Not logged in\n");
}

TEST(TokenCommandTest, CreatePrintsTheTokenAloneAndSendsTheUser) {
  FakeController ctl;
  ctl.Reply("POST", "/v1/tokens", 201,
            R"({"tenant": "team-a", "user": "alice", "name": "alice@team-a", "token": "tsr_x"})");
  TokenOptions o;
  o.action = "create";
  o.tenant = "team-a";
  o.user = "alice";
  std::ostringstream out, err;
  EXPECT_EQ(RunToken(ctl.Config(), o, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "tsr_x\n");
  ASSERT_EQ(ctl.requests().size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(ctl.requests()[0].body),
            (nlohmann::json{{"tenant", "team-a"}, {"user", "alice"}}));
}

TEST(HistoryCommandTest, FollowsPagesAndShowsWhoAndWhere) {
  FakeController ctl;
  ctl.On("GET", "/v1/history", [](const httplib::Request& req, httplib::Response& res) {
    const nlohmann::json first = {
        {"id", 7},
        {"name", "train"},
        {"user", "alice"},
        {"tenant", "team-a"},
        {"queue", "team-a"},
        {"state", "failed"},
        {"exit_code", 3},
        {"end_time", "2026-11-29T21:00:00Z"},
        {"elapsed_seconds", 125.0},
        {"gpus", 2},
        {"nodes", {"n1"}},
        {"attempts", {{{"tasks", {{{"node", "n1"}, {"gpus", {0, 1}}}}}}}}};
    nlohmann::json second = first;
    second["id"] = 9;
    second["state"] = "succeeded";
    second["exit_code"] = 0;
    const bool later = req.has_param("after");
    res.set_content(nlohmann::json{{"jobs", {later ? second : first}},
                                   {"next", later ? nlohmann::json(nullptr) : nlohmann::json("8")}}
                        .dump(),
                    "application/json");
  });
  HistoryOptions o;
  o.user = "alice";
  o.output = "wide";
  std::ostringstream out, err;
  ManualClock clock = TestClock();
  EXPECT_EQ(RunHistory(ctl.Config(), o, clock, out, err), 0) << err.str();
  const std::vector<SeenRequest> seen = ctl.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].Param("user"), "alice");
  EXPECT_EQ(seen[0].Param("since"), "2026-11-28T21:10:00Z");
  EXPECT_EQ(seen[1].Param("after"), "8");
  EXPECT_NE(out.str().find("USER"), std::string::npos);
  EXPECT_NE(out.str().find("n1:0,1"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("2m5s"), std::string::npos) << out.str();
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);  // header and two jobs
}

}  // namespace
}  // namespace tessera
