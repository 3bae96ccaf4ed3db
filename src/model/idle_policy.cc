#include "model/idle_policy.h"

namespace tessera {

std::string_view IdleActionName(IdleAction action) {
  switch (action) {
    case IdleAction::kNotify:
      return "notify";
    case IdleAction::kRequeue:
      return "requeue";
    case IdleAction::kCancel:
      return "cancel";
  }
  return "notify";
}

}  // namespace tessera
