// The agent protocol's text forms: task keys, task state names and the base64 that
// carries log bytes (declared in agent_protocol.h).
#include <array>
#include <string>
#include <string_view>

#include "api/agent_protocol.h"
#include "api/json_fields.h"

namespace tessera {
namespace {

constexpr std::string_view kBase64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string ToString(const TaskKey& key) {
  return "job " + std::to_string(key.job) + " task " + std::to_string(key.task) + " attempt " +
         std::to_string(key.attempt);
}

std::string_view TaskStateName(TaskState state) {
  switch (state) {
    case TaskState::kRunning:
      return "running";
    case TaskState::kExited:
      return "exited";
    case TaskState::kFailedToStart:
      return "failed_to_start";
    case TaskState::kLost:
      return "lost";
  }
  return "running";
}

StatusOr<TaskState> ParseTaskState(std::string_view name) {
  for (TaskState s :
       {TaskState::kRunning, TaskState::kExited, TaskState::kFailedToStart, TaskState::kLost}) {
    if (name == TaskStateName(s)) {
      return s;
    }
  }
  return InvalidArgumentError("expected running, exited, failed_to_start or lost, got '" +
                              ToValidUtf8(name.substr(0, 64)) + "'");
}

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16 |
                 static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8 |
                 static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 2]));
    out += kBase64[v >> 18 & 63];
    out += kBase64[v >> 12 & 63];
    out += kBase64[v >> 6 & 63];
    out += kBase64[v & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) {
      v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    }
    out += kBase64[v >> 18 & 63];
    out += kBase64[v >> 12 & 63];
    out += i + 1 < bytes.size() ? kBase64[v >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

StatusOr<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return InvalidArgumentError("base64 text length is not a multiple of 4");
  }
  std::array<int, 256> value{};
  value.fill(-1);
  for (size_t i = 0; i < kBase64.size(); ++i) {
    value[static_cast<unsigned char>(kBase64[i])] = static_cast<int>(i);
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int pad = 0;
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && last && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        ++pad;
        v <<= 6;
        continue;
      }
      const int d = value[static_cast<unsigned char>(c)];
      if (d < 0 || pad > 0) {
        return InvalidArgumentError("not base64: bad character at " + std::to_string(i + k));
      }
      v = v << 6 | static_cast<uint32_t>(d);
    }
    out += static_cast<char>(v >> 16 & 0xFF);
    if (pad < 2) {
      out += static_cast<char>(v >> 8 & 0xFF);
    }
    if (pad < 1) {
      out += static_cast<char>(v & 0xFF);
    }
  }
  return out;
}

}  // namespace tessera
