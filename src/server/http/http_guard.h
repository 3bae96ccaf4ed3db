// The HTTP layer's limits on connections, which cpp-httplib lacks. The library gives each
// connection a worker for as long as it reads the request's headers, bounded only per
// read (the read timeout), so a thousand clients that trickle their headers a byte at a
// time (or send nothing) hold every worker of the pool and stop the API.
// NewGuardedHttpServer makes the controller's server with two limits:
//
// - A total header deadline (header_timeout_ms). Plain HTTP: a connection's first
//   request line and headers must all have arrived within it of the connection being
//   taken from the accept queue, however slowly the bytes trickle; past it the
//   connection is answered 408 and closed. Until its headers are complete a connection
//   waits on one shared epoll thread (it peeks, MSG_PEEK, for the blank line that ends
//   them), not on a worker: slow or silent clients hold no worker at all. Later requests
//   on a keep-alive connection are read by the worker that served the one before: the
//   idle wait for the next request is bounded by the keep-alive timeout
//   (set_keep_alive_timeout) and its headers by header_timeout_ms from their first byte,
//   after which the connection is closed (400); such a connection holds its worker for
//   at most keep-alive timeout + header_timeout_ms per request. Bodies stay bounded per
//   read only (set_read_timeout).
// - A cap on concurrent connections per client IP address (max_connections_per_source;
//   an IPv4-mapped IPv6 address counts as the IPv4 one, other IPv6 addresses each on
//   their own). A connection beyond it is answered 429 and closed at once, without
//   holding a worker. Loopback is not exempt: a local client is no more trusted than a
//   remote one, and the CLI, the Python client and agents on the controller's host use
//   one or a few connections each. Behind a reverse proxy (every client one address)
//   raise the cap or set 0.
// - TLS (both tls_cert and tls_key set): the library's TLS connection handling is
//   private and encrypted bytes cannot be peeked at, so only the cap applies, through
//   OpenSSL: an info callback counts a connection when its handshake starts (one beyond
//   the cap is shut down, so the handshake fails at once) and the count drops when the
//   library frees the connection's SSL object. There is no total header deadline under
//   TLS: the handshake and each read of the headers are bounded by the read timeout, and
//   a TLS connection holds a worker while it handshakes and sends its headers.
//
// Why cpp-httplib stays: in Debian's 0.11.4, Server::process_and_close_socket is virtual
// (private, so the base's own loop cannot be called after a check) and process_request
// is protected, so a subclass owns each plain connection (the wait,
// the cap, the keep-alive loop and a Stream whose header reads stop at the deadline and
// whose writes never raise SIGPIPE) while the library still parses, routes and writes;
// the routes, the TLS server and their tests are unchanged.
//
// Contract: the server's new_task_queue wraps `pool` (the epoll thread hands
// connections whose headers are complete to it); replacing new_task_queue afterwards
// keeps both limits but the waiting then happens on workers. The timeouts and
// keep-alive limits set on the result (set_read_timeout, set_keep_alive_timeout,
// set_keep_alive_max_count, ...) apply as usual.
//
// Thread safety: the result is used like any httplib::Server (configured, then listened
// on from one thread and stopped from another); the limits' state is behind mutexes.
#pragma once

#include <httplib.h>

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"

namespace tessera {

struct HttpGuardOptions {
  // Milliseconds within which a request's line and headers must all arrive (see above);
  // 0: no total deadline, and connections wait for their headers on workers (each read
  // bounded by the read timeout only, as in the library).
  int header_timeout_ms = 5000;
  // Concurrent connections per client IP address; 0: no cap.
  int max_connections_per_source = 64;
};

// Makes the HTTP server (HTTPS when tls_cert and tls_key are both set) with the limits
// above; with both limits 0, the library's server as it is. `pool` makes its worker pool, once per listen. InvalidArgument when the TLS
// certificate or key cannot be loaded.
StatusOr<std::unique_ptr<httplib::Server>> NewGuardedHttpServer(
    const HttpGuardOptions& options, const std::string& tls_cert, const std::string& tls_key,
    std::function<httplib::TaskQueue*()> pool);

}  // namespace tessera
