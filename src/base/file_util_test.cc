#include "base/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace tessera {
namespace {

TEST(WriteAllFdTest, WritesMoreThanAPipeHoldsAndFailsOnAClosedDescriptor) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string data(256 * 1024, 'x');  // four times a pipe's buffer: short writes
  std::string read;
  std::thread reader([&] {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) {
      read.append(buf, static_cast<size_t>(n));
    }
  });
  EXPECT_TRUE(WriteAllFd(fds[1], data.data(), data.size()));
  ::close(fds[1]);
  reader.join();
  EXPECT_EQ(read, data);
  EXPECT_FALSE(WriteAllFd(fds[1], data.data(), 1));  // no longer open
  ::close(fds[0]);
}

}  // namespace
}  // namespace tessera
