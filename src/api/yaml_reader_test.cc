#include "api/yaml_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera {
namespace {

TEST(YamlReaderTest, ErrorsNameTheFileThePathAndTheLine) {
  const YamlReader file("cluster.yaml");
  const YAML::Node root = YAML::Load("a:\n  b: [1, x]\n");
  Status s = file.ForEachKey(
      root, "", {"a"}, [&](const std::string&, const YAML::Node& v, const std::string& p) {
        return file.ForEachKey(
            v, p, {"b"}, [&](const std::string&, const YAML::Node& list, const std::string& lp) {
              return file.ForEachEntry(list, lp, [&](const YAML::Node& e, const std::string& ep) {
                return file.Int(e, ep).status();
              });
            });
      });
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("cluster.yaml: a.b[1]: expected an integer", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("(line 2, column 10)"), std::string::npos) << s.message();

  const YamlReader bare;
  EXPECT_EQ(bare.Error("", YAML::Node(), "oops").message(), "oops");  // built in code: no line
  EXPECT_EQ(bare.Error("x", YAML::Node(), "oops").message(), "x: oops");
}

TEST(YamlReaderTest, MapsRejectUnknownAndRepeatedKeys) {
  const YamlReader r;
  auto visit = [](const std::string&, const YAML::Node&, const std::string&) {
    return Status::Ok();
  };
  Status unknown = r.ForEachKey(YAML::Load("{a: 1, c: 2}"), "top", {"a", "b"}, visit);
  EXPECT_NE(unknown.message().find("top: unknown key 'c'; expected one of a, b"), std::string::npos)
      << unknown.message();
  Status twice = r.ForEachKey(YAML::Load("a: 1\na: 2\n"), "", {}, visit);
  EXPECT_NE(twice.message().find("key 'a' appears twice (line 2"), std::string::npos)
      << twice.message();
  EXPECT_NE(r.ForEachKey(YAML::Load("[1]"), "q", {}, visit)
                .message()
                .find("q: expected a map, got a list"),
            std::string::npos);
}

TEST(YamlReaderTest, ScalarsAndNulls) {
  const YamlReader r;
  EXPECT_EQ(*r.String(YAML::Load("~"), "s"), "");  // `key:` reads as ""
  EXPECT_EQ(*r.String(YAML::Load("abc"), "s"), "abc");
  EXPECT_EQ(r.String(YAML::Load("[a]"), "s").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*r.Int(YAML::Load("-42"), "i"), -42);
  EXPECT_FALSE(r.Int(YAML::Load("4.2"), "i").ok());
  EXPECT_NE(r.NonNegative(YAML::Load("-1"), "n").status().message().find("must not be negative"),
            std::string::npos);
  EXPECT_TRUE(*r.Bool(YAML::Load("yes"), "b"));
  EXPECT_FALSE(*r.Bool(YAML::Load("false"), "b"));
  EXPECT_NE(r.Bool(YAML::Load("maybe"), "b")
                .status()
                .message()
                .find("expected true or false, got 'maybe'"),
            std::string::npos);
  EXPECT_EQ(*r.Strings(YAML::Load("[a, b]"), "l"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.Strings(YAML::Load("~"), "l")->empty());  // null is an empty list
  EXPECT_NE(
      r.Strings(YAML::Load("{a: 1}"), "l").status().message().find("l: expected a list, got a map"),
      std::string::npos);
}

}  // namespace
}  // namespace tessera
