#include "base/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>

namespace tessera {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) {
    return InvalidArgumentError("odd: " + std::to_string(x));
  }
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  TESSERA_ASSIGN_OR_RETURN(int h, Half(x));
  TESSERA_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckPositive(int x) {
  if (x <= 0) {
    return OutOfRangeError("not positive");
  }
  return Status::Ok();
}

Status Both(int a, int b) {
  TESSERA_RETURN_IF_ERROR(CheckPositive(a));
  TESSERA_RETURN_IF_ERROR(CheckPositive(b));
  return Status::Ok();
}

TEST(StatusTest, OkByDefaultAndPrints) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
  Status e = ResourceExhaustedError("queue over quota");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(e.ToString(), "ResourceExhausted: queue over quota");
}

TEST(StatusTest, ErrnoTextNamesTheError) {
  EXPECT_EQ(ErrnoText(ENOENT), "No such file or directory");
  EXPECT_EQ(ErrnoText(EACCES), "Permission denied");
}

TEST(StatusTest, StatusOrCarriesValueOrError) {
  EXPECT_EQ(*Quarter(12), 3);
  StatusOr<int> bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "odd: 3");
}

TEST(StatusTest, ReturnIfErrorStopsAtFirstFailure) {
  EXPECT_TRUE(Both(1, 2).ok());
  EXPECT_EQ(Both(1, -1).code(), StatusCode::kOutOfRange);
}

TEST(StatusTest, StatusOrMovesOnlyTypes) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(7);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> owned = std::move(p).value();
  EXPECT_EQ(*owned, 7);
}

TEST(StatusTest, EveryCodeHasAName) {
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    EXPECT_NE(StatusCodeName(static_cast<StatusCode>(c)), "Unknown");
  }
}

}  // namespace
}  // namespace tessera
