#include "base/pty_frames.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera {
namespace {

std::string Frame(char type, const std::string& payload) {
  std::string out(kPtyFrameHeader, '\0');
  EncodePtyHeader(type, payload.size(), out.data());
  return out + payload;
}

TEST(PtyFramesTest, RoundTripsADataFrameByteForByte) {
  const std::string payload("ls\0\xff\r", 5);
  const std::string bytes = Frame(kPtyData, payload);
  ASSERT_EQ(bytes.size(), 8u);
  EXPECT_EQ(bytes[1], 0);
  EXPECT_EQ(bytes[2], 5);
  PtyFrame f;
  ASSERT_EQ(DecodePtyFrame(bytes.data(), bytes.size(), &f), 8);
  EXPECT_EQ(f.type, kPtyData);
  EXPECT_EQ(std::string(f.payload, f.size), payload);
}

TEST(PtyFramesTest, IncompleteFramesWaitForMoreBytes) {
  const std::string bytes = Frame(kPtyData, std::string(300, 'x')) + Frame(kPtyHello, "s");
  PtyFrame f;
  EXPECT_EQ(DecodePtyFrame(bytes.data(), 2, &f), 0);    // half a header
  EXPECT_EQ(DecodePtyFrame(bytes.data(), 302, &f), 0);  // part of the payload
  ASSERT_EQ(DecodePtyFrame(bytes.data(), bytes.size(), &f), 303);
  EXPECT_EQ(f.size, 300u);
  ASSERT_EQ(DecodePtyFrame(bytes.data() + 303, bytes.size() - 303, &f), 4);
  EXPECT_EQ(f.type, kPtyHello);
}

TEST(PtyFramesTest, RefusesUnknownTypesAndOversizedLengths) {
  PtyFrame f;
  const std::string unknown = Frame('Z', "x");
  EXPECT_EQ(DecodePtyFrame(unknown.data(), unknown.size(), &f), -1);
  std::string big = Frame(kPtyData, "");
  big[1] = static_cast<char>(0x10);  // 0x1001: one byte over the largest payload
  big[2] = 1;
  EXPECT_EQ(DecodePtyFrame(big.data(), big.size(), &f), -1);
  const std::string largest = Frame(kPtyData, std::string(kMaxPtyPayload, 'y'));
  EXPECT_EQ(DecodePtyFrame(largest.data(), largest.size(), &f), static_cast<long>(kMaxPtyFrame));
}

TEST(PtyFramesTest, WindowAndExitPayloads) {
  char w[4];
  EncodePtyWindow(50, 300, w);
  const std::string wf = Frame(kPtyWindow, std::string(w, 4));
  PtyFrame f;
  ASSERT_GT(DecodePtyFrame(wf.data(), wf.size(), &f), 0);
  uint16_t rows = 0, cols = 0;
  ASSERT_TRUE(DecodePtyWindow(f, &rows, &cols));
  EXPECT_EQ(rows, 50);
  EXPECT_EQ(cols, 300);
  int32_t status = 0;
  EXPECT_FALSE(DecodePtyExit(f, &status));  // a window is not an exit

  char x[4];
  EncodePtyExit(137, x);
  const std::string xf = Frame(kPtyExit, std::string(x, 4));
  ASSERT_GT(DecodePtyFrame(xf.data(), xf.size(), &f), 0);
  ASSERT_TRUE(DecodePtyExit(f, &status));
  EXPECT_EQ(status, 137);
}

TEST(PtyFramesTest, SecretsCompareWhole) {
  EXPECT_TRUE(PtySecretEquals("abc", 3, "abc", 3));
  EXPECT_FALSE(PtySecretEquals("abc", 3, "abd", 3));
  EXPECT_FALSE(PtySecretEquals("abc", 3, "ab", 2));
  EXPECT_FALSE(PtySecretEquals("ab", 2, "abc", 3));
  EXPECT_FALSE(PtySecretEquals("", 0, "", 0));  // no secret never matches
}

}  // namespace
}  // namespace tessera
