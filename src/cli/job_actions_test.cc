#include "cli/job_actions.h"

#include <gtest/gtest.h>

#include "cli/cluster_views.h"

namespace tessera {
namespace {

using json = nlohmann::json;

json Element(uint64_t id, uint64_t array, int64_t index, const std::string& state,
             const std::string& reason) {
  return json{{"id", id},         {"array_job", array}, {"array_index", index},
              {"array", "0-9%2"}, {"state", state},     {"reason", reason},
              {"name", "sweep"}};
}

TEST(FoldArraysTest, PendingElementsWithOneReasonFoldIntoOneRow) {
  const std::string throttle = "array throttle: 2 elements of array 10 run at once (%2)";
  json jobs = json::array({json{{"id", 30}, {"state", "pending"}, {"reason", "x"}},
                           Element(19, 10, 9, "pending", throttle),
                           Element(18, 10, 8, "pending", throttle),
                           Element(17, 10, 7, "pending", throttle),
                           Element(15, 10, 5, "pending", throttle),
                           Element(12, 10, 2, "pending", "held: release it"),
                           Element(11, 10, 1, "running", ""), Element(10, 10, 0, "running", "")});
  json folded = FoldArrays(jobs);
  ASSERT_EQ(folded.size(), 5u);
  EXPECT_EQ(folded[0]["id"], 30);
  EXPECT_FALSE(folded[0].contains("display_id"));
  EXPECT_EQ(folded[1]["display_id"], "10_[5,7-9%2]");
  EXPECT_EQ(folded[1]["array_pending"], 4);
  EXPECT_EQ(folded[2]["display_id"], "10_2");  // alone: not folded
  EXPECT_EQ(folded[3]["display_id"], "10_1");
  EXPECT_EQ(folded[4]["display_id"], "10_0");
  const std::string table = JobsTable(folded, false, 0);
  EXPECT_NE(table.find("10_[5,7-9%2]"), std::string::npos) << table;
  EXPECT_NE(table.find("10_1 "), std::string::npos) << table;
}

}  // namespace
}  // namespace tessera
