"""HTTP to one controller or several, as the `tessera` command speaks it.

One address: a request goes there and what happens is reported at once. Several (the
controllers of one cluster, or one that redirected to a leader): a request goes to the
one that answered last; a follower's 307 with ``X-Tessera-Leader`` sends it to that
leader (at most 3 hops; a leader not in the list joins it). A refused connection, a
timeout, a 503 or a redirect to a leader that does not answer (a dead leader, named by
its followers until its lease ends) sends it on to the next address; when every address
has been tried it goes round again after a pause (0.25 s, doubling up to 2 s), again and
again, until a controller answers or the failover timeout (60 s; TESSERA_FAILOVER_TIMEOUT
seconds) has passed, and then fails with "no controller answered: URL: why; ...". Before
the first pause it writes one line on stderr: "controller at URL not answering (why);
retrying for up to N s". A request that may have reached a controller that then did not
answer is sent elsewhere only when that cannot carry it out twice: GET, PUT, DELETE and
a POST with an Idempotency-Key. These are the rules of the CLI's ApiClient
(src/cli/api_client.h).
"""

import http.client
import json
import math
import socket
import ssl
import sys
import threading
import time
import urllib.parse

from ._errors import TesseraError, error_from_answer

MAX_REDIRECTS = 3
CONNECT_TIMEOUT = 5.0
FAILOVER_TIMEOUT = 60.0
FIRST_PAUSE = 0.25
MAX_PAUSE = 2.0
FAILOVER_READ_TIMEOUT = 10.0
USER_AGENT = "tessera-python"


class Answer:
    """A controller's answer: HTTP status, headers (names lower-cased) and body bytes."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name, default=""):
        return self.headers.get(name.lower(), default)

    def json(self, what):
        try:
            return json.loads(self.body.decode("utf-8"))
        except ValueError:
            raise TesseraError(self.status, "Internal",
                               "the controller's answer to %s is not JSON" % what) from None


class Endpoint:
    """One controller address: scheme://host[:port][/prefix]."""

    def __init__(self, given):
        url = given.strip()
        if "://" not in url:
            url = "http://" + url
        parts = urllib.parse.urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise ValueError("bad server URL %r: expected http:// or https://" % given)
        if parts.query or parts.fragment or "@" in parts.netloc or " " in url:
            raise ValueError("bad server URL %r: expected scheme://host[:port][/prefix]" % given)
        try:
            port = parts.port
        except ValueError:
            raise ValueError("bad server URL %r: the port must be 1..65535" % given) from None
        if not parts.hostname:
            raise ValueError("bad server URL %r: no host" % given)
        self.tls = scheme == "https"
        self.host = parts.hostname
        self.port = port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        self.url = url.rstrip("/")

    def __eq__(self, other):
        return isinstance(other, Endpoint) and (self.url, self.prefix) == (other.url, other.prefix)

    def __hash__(self):
        return hash(self.url)


class _NoAnswer(Exception):
    """No HTTP answer; `maybe_taken` when the request may have reached the controller."""

    def __init__(self, why, maybe_taken):
        super().__init__(why)
        self.why = why
        self.maybe_taken = maybe_taken


def _why(exc):
    if isinstance(exc, socket.timeout):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return text


def _to_stderr(line):
    sys.stderr.write("tessera_client: %s\n" % line)
    sys.stderr.flush()


def split_servers(servers):
    """The addresses in "URL,URL,..." (empty items left out)."""
    return [s.strip() for s in servers.split(",") if s.strip()]


class Transport:
    """Sends requests; thread-safe (each request opens its own connection).

    `failover_budget`: the seconds a request may go on trying several controllers;
    `progress(line)`: where the line about waiting goes (default: stderr).
    """

    def __init__(self, servers, token, ca_cert=None, insecure=False, timeout=30.0,
                 connect_timeout=CONNECT_TIMEOUT, failover_budget=FAILOVER_TIMEOUT,
                 failover_read_timeout=FAILOVER_READ_TIMEOUT, progress=None):
        urls = split_servers(servers)
        if not urls:
            raise ValueError("bad server URL %r: no host" % servers)
        self._endpoints = []
        for url in urls:
            self._endpoint_for(url)
        self._token = token or ""
        self._timeout = float(timeout)
        self._connect_timeout = min(connect_timeout, self._timeout)
        self._failover_budget = failover_budget
        self._failover_read_timeout = failover_read_timeout
        self._progress = progress or _to_stderr
        self._several_listed = len(urls) > 1
        self._current = 0
        self._lock = threading.Lock()
        # Made now, for every address: a leader learned later may be https, and a bad
        # CA file is better reported at once.
        self._ssl = _ssl_context(ca_cert, insecure)

    @property
    def server(self):
        """The URL of the controller that answered last (at first, the first one)."""
        return self._endpoints[self._current].url

    @property
    def servers(self):
        return [e.url for e in self._endpoints]

    def _endpoint_for(self, url):
        endpoint = Endpoint(url)
        for i, e in enumerate(self._endpoints):
            if e == endpoint:
                return i
        self._endpoints.append(endpoint)
        return len(self._endpoints) - 1

    def _io_timeout(self):
        # With several addresses a stopped controller must not hold a request long.
        if self._several_listed or len(self._endpoints) > 1:
            return min(self._timeout, self._failover_read_timeout)
        return self._timeout

    def _send_once(self, endpoint, method, path, headers, body):
        if endpoint.tls:
            conn = http.client.HTTPSConnection(endpoint.host, endpoint.port,
                                               timeout=self._connect_timeout, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(endpoint.host, endpoint.port,
                                              timeout=self._connect_timeout)
        try:
            conn.connect()
        except (OSError, ssl.SSLError) as exc:
            conn.close()
            raise _NoAnswer(_why(exc), maybe_taken=False) from None
        try:
            conn.sock.settimeout(self._io_timeout())
            conn.request(method, endpoint.prefix + path, body=body, headers=headers)
            response = conn.getresponse()
            answer_headers = {k.lower(): v for k, v in response.getheaders()}
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise _NoAnswer(_why(exc), maybe_taken=True) from None
        finally:
            conn.close()
        return Answer(response.status, answer_headers, data)

    def request(self, method, path, body=None, headers=None):
        """Sends `method path` and returns the 2xx Answer; raises TesseraError otherwise.

        `path` starts with '/' and carries its query string; `body` is bytes or None.
        """
        all_headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        all_headers.update(headers or {})
        if self._token:
            all_headers["Authorization"] = "Bearer " + self._token
        resendable = method != "POST" or any(k.lower() == "idempotency-key" for k in all_headers)
        attempt = _Attempt(method, path, all_headers, body, resendable)
        deadline = time.monotonic() + self._failover_budget
        pause = FIRST_PAUSE
        told = False
        later_round = False
        while True:
            # A round: every address once, from the one that answered last, in order.
            attempt.tried = set()
            attempt.silent = None
            with self._lock:
                at = self._current
            while True:
                answer = self._try_from(at, attempt)
                if answer is not None:
                    return answer
                nxt = self._next_untried(at, attempt.tried)
                if nxt is None:
                    break
                if later_round and time.monotonic() >= deadline:
                    raise attempt.no_answer(self._endpoints)
                at = nxt
            now = time.monotonic()
            if now >= deadline:
                raise attempt.no_answer(self._endpoints)
            if not told:
                silent = attempt.silent if attempt.silent is not None else at
                self._progress("controller at %s not answering (%s); retrying for up to %d s"
                               % (self._endpoints[silent].url,
                                  attempt.problems.get(silent, "no answer"),
                                  math.ceil(deadline - now)))
                told = True
            time.sleep(min(pause, deadline - now))
            pause = min(pause * 2, MAX_PAUSE)
            later_round = True

    def _next_untried(self, base, tried):
        count = len(self._endpoints)
        for step in range(1, count + 1):
            i = (base + step) % count
            if i not in tried:
                return i
        return None

    def _try_from(self, at, attempt):
        """Sends to address `at`, following redirects: the final Answer, or None to go on
        (what went wrong is in `attempt`). Raises TesseraError where it must stop."""
        hops = 0  # redirects in a row: a loop of followers ends
        while True:
            endpoint = self._endpoints[at]
            attempt.tried.add(at)
            answer = None
            no_answer = None
            try:
                answer = self._send_once(endpoint, attempt.method, attempt.path,
                                         attempt.headers, attempt.body)
            except _NoAnswer as exc:
                no_answer = exc
            leader = answer.header("x-tessera-leader").strip() \
                if answer is not None and answer.status == 307 else ""
            if leader:
                # A follower, which did not carry it out: the same request to the leader,
                # unless that did not answer in this round (it is asked again next round).
                try:
                    with self._lock:
                        nxt = self._endpoint_for(leader)
                except ValueError:
                    nxt = None
                attempt.problems[at] = "redirects to " + leader
                if nxt is not None and hops < MAX_REDIRECTS and nxt not in attempt.tried:
                    hops += 1
                    at = nxt
                    continue
                if len(self._endpoints) == 1:
                    return self._answered(at, answer)
                return None
            if len(self._endpoints) == 1:
                # One address: what it said, as it said it.
                if no_answer is not None:
                    raise TesseraError(None, "Unavailable", "cannot reach the controller at %s: %s"
                                       % (endpoint.url, no_answer.why))
                return self._answered(at, answer)
            if answer is not None and answer.status != 503:
                return self._answered(at, answer)
            # A leader's own 503 (a write its store could not settle) may have been
            # carried out; a follower's "no leader" and a fenced refusal say nothing was.
            if answer is not None and not attempt.resendable and \
                    b"no leader:" not in answer.body and b"fenced:" not in answer.body:
                return self._answered(at, answer)
            if no_answer is not None and no_answer.maybe_taken and not attempt.resendable:
                raise TesseraError(None, "Unavailable",
                                   "cannot reach the controller at %s: %s; not sent to another "
                                   "controller: it may have been carried out"
                                   % (endpoint.url, no_answer.why))
            attempt.problems[at] = no_answer.why if no_answer is not None else \
                error_from_answer(answer.status, answer.body).message
            if attempt.silent is None:
                attempt.silent = at
            return None

    def _answered(self, at, answer):
        with self._lock:
            self._current = at
        if 200 <= answer.status <= 299:
            return answer
        error = error_from_answer(answer.status, answer.body)
        if answer.status == 401 and not self._token:
            error.message += ("; no token was given (token=, TESSERA_TOKEN, TESSERA_TOKEN_FILE "
                              "or the config file)")
        raise error


class _Attempt:
    """One request on its way round the controllers: what to send and what each said."""

    def __init__(self, method, path, headers, body, resendable):
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.resendable = resendable
        self.problems = {}  # address index -> what went wrong there last
        self.tried = set()  # the addresses asked in this round
        self.silent = None  # the first address in the round that did not answer

    def no_answer(self, endpoints):
        said = "; ".join("%s: %s" % (e.url, self.problems.get(i, "not tried"))
                         for i, e in enumerate(endpoints))
        return TesseraError(None, "Unavailable", "no controller answered: " + said)


def _ssl_context(ca_cert, insecure):
    context = ssl.create_default_context(cafile=ca_cert or None)
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
