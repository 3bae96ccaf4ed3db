#include "base/pty_frames.h"

namespace tessera {

namespace {

bool KnownType(char type) {
  return type == kPtyHello || type == kPtyData || type == kPtyWindow || type == kPtyExit ||
         type == kPtyRefused;
}

uint32_t Byte(const char* p, size_t i) { return static_cast<unsigned char>(p[i]); }

}  // namespace

void EncodePtyHeader(char type, size_t size, char* out) {
  out[0] = type;
  out[1] = static_cast<char>((size >> 8) & 0xff);
  out[2] = static_cast<char>(size & 0xff);
}

long DecodePtyFrame(const char* buf, size_t size, PtyFrame* frame) {
  if (size < kPtyFrameHeader) {
    return 0;
  }
  if (!KnownType(buf[0])) {
    return -1;
  }
  const size_t length = (Byte(buf, 1) << 8) | Byte(buf, 2);
  if (length > kMaxPtyPayload) {
    return -1;
  }
  if (size < kPtyFrameHeader + length) {
    return 0;
  }
  frame->type = buf[0];
  frame->payload = buf + kPtyFrameHeader;
  frame->size = length;
  return static_cast<long>(kPtyFrameHeader + length);
}

void EncodePtyWindow(uint16_t rows, uint16_t cols, char* out) {
  out[0] = static_cast<char>(rows >> 8);
  out[1] = static_cast<char>(rows & 0xff);
  out[2] = static_cast<char>(cols >> 8);
  out[3] = static_cast<char>(cols & 0xff);
}

bool DecodePtyWindow(const PtyFrame& frame, uint16_t* rows, uint16_t* cols) {
  if (frame.type != kPtyWindow || frame.size != 4) {
    return false;
  }
  *rows = static_cast<uint16_t>((Byte(frame.payload, 0) << 8) | Byte(frame.payload, 1));
  *cols = static_cast<uint16_t>((Byte(frame.payload, 2) << 8) | Byte(frame.payload, 3));
  return true;
}

void EncodePtyExit(int32_t status, char* out) {
  const auto v = static_cast<uint32_t>(status);
  for (int i = 0; i < 4; ++i) {
    out[i] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  }
}

bool DecodePtyExit(const PtyFrame& frame, int32_t* status) {
  if (frame.type != kPtyExit || frame.size != 4) {
    return false;
  }
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) {
    v = (v << 8) | Byte(frame.payload, i);
  }
  *status = static_cast<int32_t>(v);
  return true;
}

bool PtySecretEquals(const char* a, size_t a_size, const char* b, size_t b_size) {
  unsigned diff = a_size == b_size ? 0U : 1U;
  for (size_t i = 0; i < a_size; ++i) {
    diff |= static_cast<unsigned>(static_cast<unsigned char>(a[i]) ^
                                  static_cast<unsigned char>(i < b_size ? b[i] : 0));
  }
  return diff == 0 && a_size > 0;
}

}  // namespace tessera
