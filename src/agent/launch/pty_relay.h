// A task's pseudo-terminal (`tessera run --pty`), held by its shim (agent/launch/task_shim.h).
//
// Why the shim and a TCP listener of its own: the shim already owns the task's processes
// and outlives restarts of the agent, so the terminal's master side lives exactly as long
// as the task, whatever happens to the agent or the controller; and the keystrokes and
// output go straight between the user's CLI and the node, not through the controller's
// store-backed agent channel, which batches reports per heartbeat (a relay through the
// controller would add its latency to every keystroke and its load to every byte).
//
//   agent (OpenPtyEndpoint, before the shim starts): a pty pair, the master
//     non-blocking, the slave owned by the task's uid; a listening TCP socket on one
//     address only, LaunchSpec::pty_address (the node's advertised address), else
//     loopback (127.0.0.1), port chosen by the kernel. The agent reports the port; the
//     controller hands {address, port, secret} to the job's tenant (GET
//     /v1/jobs/{id}/attach). The secret came with the launch, made by the controller.
//   leader: setsid, the slave as controlling terminal (TIOCSCTTY) and stdin/out/err.
//   shim (PtyRelay): everything the task writes is appended to its log as usual and sent
//     to the attached client, or kept (the last kPtyBacklog bytes) until one attaches.
//     A client must send its hello with the secret within kPtyHelloMs of connecting,
//     before it holds anything: up to kPtyMaxPending connections wait for their hellos
//     at once, each with its own deadline (a new one, when all are taken, replaces the
//     one that has waited longest), so idle connections cannot keep the owner out. A
//     hello that cannot carry the secret (another type, another length) is refused as
//     soon as its header arrives; a whole one is compared in constant time, and a wrong
//     secret refused at once. One client attached at a time (another is refused with a
//     reason); a client that goes away may attach again.
//     Keystrokes are written to the master as the task reads them; window sizes are set
//     with TIOCSWINSZ (the kernel sends the task SIGWINCH). When the task is gone the
//     rest of its output and its status ('X') are sent, and the listener closes.
// The stream is plaintext TCP (base/pty_frames.h): the secret keeps others from
// attaching, not from listening on the network between the CLI and the node.
//
// Thread safety: OpenPtyEndpoint is reentrant; PtyRelay runs in the shim, one thread,
// async-signal-safe (no allocation, no locks).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "base/pty_frames.h"
#include "base/status.h"

namespace tessera {

struct LaunchSpec;
struct ShimPlan;

inline constexpr size_t kPtyBacklog = 16 << 10;
inline constexpr int kPtyHelloMs = 2000;         // from connect to a checked hello
inline constexpr size_t kPtyMaxPending = 16;     // connections waiting for their hellos
inline constexpr size_t kMaxPtySecret = 256;     // as api/agent_protocol.cc bounds it
inline constexpr int kPtySendTimeoutMs = 10000;  // a client that stops reading is dropped

// Makes the pty pair and the listener for `spec` into `plan`; the listener's port in
// *port. InvalidArgument for a pty_address that is not one numeric IPv4/IPv6 address
// of this node (a wildcard is refused) or a secret over kMaxPtySecret bytes; Internal
// when the kernel has no ptys or sockets to give or the address cannot be bound.
Status OpenPtyEndpoint(const LaunchSpec& spec, ShimPlan* plan, int* port);

class PtyRelay {
 public:
  PtyRelay(int master, int listener, int log_fd, const char* secret, size_t secret_size);
  PtyRelay(const PtyRelay&) = delete;
  PtyRelay& operator=(const PtyRelay&) = delete;

  // Relays until the leader has exited, reaping the task's other children meanwhile, and
  // returns the leader's siginfo (the leader is left a zombie), as the shim's wait does.
  // With a lease (plan.lease_ns), kills the task once it has expired (*fenced).
  siginfo_t Run(const ShimPlan& plan, pid_t leader, pid_t self, bool* fenced);

  // Once nothing of the task is left: its last output, the exit frame with `status`,
  // and every descriptor of the relay closed.
  void Finish(int32_t status);

 private:
  // A connection whose hello is not yet checked.
  struct Pending {
    int fd = -1;
    int64_t until_ms = 0;
    char hello[kPtyFrameHeader + kMaxPtySecret];
    size_t size = 0;  // of hello
  };

  void Accept();
  void ReadHello(Pending& p);
  void ClosePending(Pending& p);
  void Attach(int fd);
  void DropClient();
  void ReadClient();
  bool ReadMaster();  // true when it read output
  void WriteMaster();
  void Output(const char* data, size_t size);
  bool Send(char type, const char* payload, size_t size);
  void Refuse(int fd, const char* why);

  int master_;
  int listener_;
  int log_fd_;
  const char* secret_;
  size_t secret_size_;
  bool master_open_ = true;  // false once the master reads EOF/EIO (no slave is open)

  int client_ = -1;
  Pending pending_[kPtyMaxPending];

  char from_client_[kMaxPtyFrame * 2];
  size_t from_client_size_ = 0;
  char input_[kMaxPtyPayload * 2];  // keystrokes not yet written to the master
  size_t input_size_ = 0;

  char backlog_[kPtyBacklog];  // a ring of the output no client has seen
  size_t backlog_start_ = 0;
  size_t backlog_size_ = 0;

  char frame_[kMaxPtyFrame];
};

}  // namespace tessera
