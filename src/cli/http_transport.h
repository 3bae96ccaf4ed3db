// HttpTransport: the command line's HTTP/1.1 client (plain TCP or TLS through OpenSSL),
// under ApiClient (cli/api_client.h).
//
// Why not the HTTP library the daemons use: a CLI call is one or a few requests, and
// loading that library, with the TLS, compression and C++ libraries it brings and the
// OpenSSL error strings it loads at start-up, was 3.7 ms of `tessera --version`'s 5.9
// ms of CPU (docs/benchmarks.md, "The CLI's start-up"). This client links OpenSSL
// statically and initialises it only for an https:// URL.
//
// What it speaks: requests with a Content-Length body; answers framed by
// Content-Length, chunked transfer coding or the end of the connection; keep-alive
// (the connection is kept while the server allows it). A kept connection that the
// server has closed meanwhile is opened again, and a GET or PUT sent again on it when no
// byte of the answer came (never a POST: it may have been taken). No proxies, no
// compression, no redirects.
//
// Failures are Unavailable, with what went wrong (Problem, worded for users).
// Thread safety: one thread at a time per transport.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tessera {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpTarget {
  bool tls = false;
  std::string host;  // a name, an IPv4 address or a bracketed IPv6 address
  int port = 80;
  std::string ca_cert;    // tls: PEM file of CAs to trust; "": the system's
  bool insecure = false;  // tls: skip certificate verification
  int connect_timeout_ms = 5000;
  int io_timeout_ms = 60000;  // for each wait on the socket
};

struct HttpAnswer {
  int status = 0;
  HttpHeaders headers;
  std::string body;
};

class HttpTransport {
 public:
  explicit HttpTransport(HttpTarget target);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // `path` is the request target (path and query, already encoded); `body` is sent with
  // a Content-Length when the method is POST or PUT, or when it is not empty.
  // `maybe_taken` (optional) tells, on a failure, whether the request may have reached
  // the server (a connection was up and sending had begun): false means it surely did
  // not, so that it may go elsewhere without being carried out twice.
  StatusOr<HttpAnswer> Send(std::string_view method, const std::string& path,
                            const HttpHeaders& headers, const std::string& body,
                            bool* maybe_taken = nullptr);

  struct Connection;

 private:
  HttpTarget target_;
  std::unique_ptr<Connection> connection_;
};

}  // namespace tessera
