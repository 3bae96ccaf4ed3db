"""A tiny in-process stand-in for a controller: http.server on 127.0.0.1, a free port.

Each request is recorded; `respond(request)` decides the answer: (status, headers,
body), DROP (read the request, then close without answering) or HANG (answer nothing
until the server closes).
"""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DROP = "drop"
HANG = "hang"


class Request:
    def __init__(self, method, path, headers, body):
        self.method = method
        self.path = path  # with its query string
        self.headers = headers  # names lower-cased
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))


def json_answer(status, doc, headers=None):
    return status, dict(headers or {}, **{"Content-Type": "application/json"}), \
        json.dumps(doc).encode("utf-8")


def error_answer(status, code, message):
    return json_answer(status, {"error": {"code": code, "message": message}})


class _Handler(BaseHTTPRequestHandler):
    def _serve(self):
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = Request(self.command, self.path,
                          {k.lower(): v for k, v in self.headers.items()}, body)
        with fake.lock:
            fake.requests.append(request)
        answer = fake.respond(request)
        if answer == DROP:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if answer == HANG:
            fake.closed.wait(10)
            self.close_connection = True
            return
        status, headers, data = answer
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _serve

    def log_message(self, *args):
        pass


class FakeController:
    """Serves until close(); `respond` may be replaced at any time."""

    def __init__(self, respond=None):
        self.requests = []
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.respond = respond or (lambda request: json_answer(200, {}))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.fake = self
        self.url = "http://127.0.0.1:%d" % self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True)
        self._thread.start()

    def seen(self, method=None, prefix=""):
        with self.lock:
            return [r for r in self.requests
                    if (method is None or r.method == method) and r.path.startswith(prefix)]

    def close(self):
        self.closed.set()
        self._server.shutdown()
        self._server.server_close()


def dead_url():
    """The URL of a loopback port nothing listens on (a connection is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "http://127.0.0.1:%d" % s.getsockname()[1]
