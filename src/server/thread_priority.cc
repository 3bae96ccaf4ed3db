#include "server/thread_priority.h"

#include <sys/resource.h>
#include <unistd.h>

namespace tessera {
namespace {

constexpr int kBulkNice = 10;

thread_local bool t_lowered = false;

bool CanRestore() {
  static const bool can = [] {
    if (::geteuid() == 0) {
      return true;
    }
    rlimit limit{};
    // RLIMIT_NICE n allows nice values down to 20 - n.
    return ::getrlimit(RLIMIT_NICE, &limit) == 0 && limit.rlim_cur >= 20;
  }();
  return can;
}

}  // namespace

void LowerThreadPriority() {
  if (t_lowered || !CanRestore()) {
    return;
  }
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kBulkNice) == 0) {
    t_lowered = true;
  }
}

void RestoreThreadPriority() {
  if (t_lowered && ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 0) == 0) {
    t_lowered = false;
  }
}

}  // namespace tessera
