// The framing of an attached terminal's stream: `tessera run --pty` and a task's shim
// (agent/launch/pty_relay.h) speak it over one TCP connection.
//
//   frame   = type (1 byte) | length (2 bytes, big-endian) | payload (length bytes)
//   'H' hello     client -> shim, first: the attach secret (GET /v1/jobs/{id}/attach)
//   'D' data      both ways: keystrokes to the task, the terminal's output back
//   'W' window    client -> shim: rows, columns (2 bytes each, big-endian)
//   'X' exit      shim -> client, last: the task's status (4 bytes: code, 128 + signal)
//   'R' refused   shim -> client: why (text), then the shim closes the connection
// A payload is at most kMaxPtyPayload bytes; a longer length or another type is a
// malformed stream, which ends the connection.
//
// Allocation-free and async-signal-safe: the shim runs it in a process forked from a
// multi-threaded agent. Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

inline constexpr size_t kPtyFrameHeader = 3;
inline constexpr size_t kMaxPtyPayload = 4096;
inline constexpr size_t kMaxPtyFrame = kPtyFrameHeader + kMaxPtyPayload;

inline constexpr char kPtyHello = 'H';
inline constexpr char kPtyData = 'D';
inline constexpr char kPtyWindow = 'W';
inline constexpr char kPtyExit = 'X';
inline constexpr char kPtyRefused = 'R';

struct PtyFrame {
  char type = 0;
  const char* payload = nullptr;
  size_t size = 0;
};

// Writes a frame's header for `size` (<= kMaxPtyPayload) payload bytes into out[0..3).
void EncodePtyHeader(char type, size_t size, char* out);

// The first frame of buf[0..size): the bytes it takes, with *frame pointing into buf;
// 0 while it is incomplete; -1 when the stream is malformed.
long DecodePtyFrame(const char* buf, size_t size, PtyFrame* frame);

// The payloads of 'W' (4 bytes) and 'X' (4 bytes).
void EncodePtyWindow(uint16_t rows, uint16_t cols, char* out);
bool DecodePtyWindow(const PtyFrame& frame, uint16_t* rows, uint16_t* cols);
void EncodePtyExit(int32_t status, char* out);
bool DecodePtyExit(const PtyFrame& frame, int32_t* status);

// Compares without an early exit, so the time taken says nothing of where they differ.
bool PtySecretEquals(const char* a, size_t a_size, const char* b, size_t b_size);

}  // namespace tessera
