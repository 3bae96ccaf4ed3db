#include "limiter/next_definition.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

namespace tessera_limiter {
namespace {

void Here() {}

// In this test nothing interposes the dl functions: the next definitions are the C
// library's, the ones this program calls.
TEST(NextDefinitionTest, FindsTheFunctionsTheProgramCalls) {
  const void* self = reinterpret_cast<const void*>(&Here);
  EXPECT_EQ(FindNextDefinition(self, "dlsym"), reinterpret_cast<void*>(&dlsym));
  EXPECT_EQ(FindNextDefinition(self, "dlvsym"), reinterpret_cast<void*>(&dlvsym));
  EXPECT_EQ(FindNextDefinition(self, "dlmopen"), reinterpret_cast<void*>(&dlmopen));
}

TEST(NextDefinitionTest, UnknownNamesAndTheCallersOwnObjectAreSkipped) {
  EXPECT_EQ(FindNextDefinition(reinterpret_cast<const void*>(&Here), "tessera_no_such_function"),
            nullptr);
  // Asked from inside the object that defines it: another definition or none.
  const void* real = reinterpret_cast<const void*>(&dlvsym);
  EXPECT_NE(FindNextDefinition(real, "dlvsym"), real);
}

}  // namespace
}  // namespace tessera_limiter
