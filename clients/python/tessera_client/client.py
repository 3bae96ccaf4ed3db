"""Client: the controller's API from Python (jobs, logs, usage, nodes, queues)."""

import codecs
import collections.abc
import datetime
import json
import os
import re
import time
import urllib.parse
import uuid

from . import _config
from ._errors import TesseraError
from ._job import TERMINAL_STATES, Job
from ._transport import Transport

_MAX_PAGE = 1000  # the most jobs GET /v1/jobs answers in one page
_ACTIVE_STATES = "pending,running,stopping"
_JOB_FILE_SUFFIXES = (".yaml", ".yml", ".json")
_DURATION = re.compile(r"^(\d+)([smhdw])$")
_DURATION_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def new_idempotency_key():
    """A fresh random Idempotency-Key: "py-" and 32 hex digits."""
    return "py-" + uuid.uuid4().hex


class Client:
    """A client of one Tessera cluster's controller (or of its several controllers).

    Args:
        server: the controller's URL, ``http://`` or ``https://`` (``https://host/prefix``
            puts a path prefix before every request), or several joined by ``,``: the
            controllers of one cluster, tried in turn, the leader followed.
        token: the bearer token (a tenant's, a user's or the admin's).
        ca_cert: a PEM file of the CAs to trust for https (default: the system's).
        insecure: skip TLS certificate verification.
        timeout: seconds each wait on a socket may take (10 at most with several
            controllers, so that a stopped one does not hold a request).
        failover_timeout: with several controllers, the seconds a request may go on
            trying them before it fails (default: TESSERA_FAILOVER_TIMEOUT, else 60).

    Each setting left out comes, as for the ``tessera`` command, from the environment:
    ``TESSERA_SERVER``, ``TESSERA_TOKEN`` or ``TESSERA_TOKEN_FILE`` (a file holding the
    token), ``TESSERA_CA_CERT``, ``TESSERA_INSECURE=1``; then from the config file
    ``~/.config/tessera/config.json`` that ``tessera login`` writes (keys ``server`` and
    ``token``; its token is used only with its server); else the server is
    ``http://127.0.0.1:7450`` and no token is sent.

    With several controllers a request goes to the one that answered last, follows a
    follower's redirect to the leader, and moves on to the next address on a refused
    connection, a timeout, a 503 or a redirect to a leader that does not answer; it goes
    round the addresses again, with pauses, until one answers or ``failover_timeout``
    seconds have passed (default ``TESSERA_FAILOVER_TIMEOUT``, else 60), writing one line
    on stderr when it starts waiting. A request that may
    have been carried out by a controller that then did not answer is sent again only
    when that cannot do it twice: reads, and submissions, which always carry an
    Idempotency-Key. Every error raises TesseraError.

    A Client may be shared between threads: each request opens its own connection.
    Raises ValueError for a bad server URL, an unreadable token, CA or config file.
    """

    def __init__(self, server=None, token=None, ca_cert=None, insecure=False, timeout=30,
                 failover_timeout=None):
        server, token, ca_cert, insecure, sources = _config.resolve(server, token, ca_cert,
                                                                    insecure)
        self._transport = Transport(server, token, ca_cert=ca_cert, insecure=insecure,
                                    timeout=timeout,
                                    failover_budget=_config.failover_timeout(failover_timeout))
        self._has_token = bool(token)
        self._token_source = sources.get("token")

    @property
    def server(self):
        """The URL of the controller that answered last (at first, the first one given)."""
        return self._transport.server

    def __repr__(self):
        servers = ",".join(self._transport.servers)
        token = "from %s" % self._token_source if self._has_token else "none"
        return "Client(server=%r, token=<%s>)" % (servers, token)

    # ----------------------------------------------------------------------------
    # requests

    def _get(self, path, query=None):
        if query:
            path += "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
        return self._transport.request("GET", path).json("GET " + path.split("?")[0])

    def _post(self, path, body, content_type, headers=None):
        all_headers = {"Content-Type": content_type}
        all_headers.update(headers or {})
        return self._transport.request("POST", path, body=body, headers=all_headers)

    # ----------------------------------------------------------------------------
    # jobs

    def submit(self, spec, idempotency_key=None, submit_dir=None):
        """Submits one job and returns it as a Job (``job.id`` is its id).

        Args:
            spec: the job file's keys as a dict (``{"name": "train", "command": ["python",
                "train.py"], "resources": {"gpus": 1}}``; see examples/*.yaml), or the
                job file's text (YAML, or JSON starting with ``{``), or the path of a job
                file (``.yaml``, ``.yml``, ``.json``). YAML is sent as written: the
                controller reads it, and reports errors with their line.
            idempotency_key: the key that makes resending safe; by default a new random
                one, kept for every retry of this call (so a submission resent to another
                controller after a lost answer is the same job). Give your own to make a
                re-run cell return the first job instead of a second one (the same key
                with another body is an error, 422).
            submit_dir: the directory relative paths of the command mean (the default
                working directory where it exists on the node); by default the current
                directory, as ``tessera submit`` sends it; ``""`` sends none. A spec
                that names its own ``submit_dir`` keeps it.
        """
        body, content_type = _job_body(spec, _submit_dir(submit_dir))
        key = idempotency_key or new_idempotency_key()
        answer = self._post("/v1/jobs", body, content_type, {"Idempotency-Key": key})
        return Job(answer.json("POST /v1/jobs"))

    def submit_batch(self, specs, idempotency_key=None, submit_dir=None):
        """Submits several jobs in one request, all or none; returns their ids in order.

        Args:
            specs: a list of job dicts, or a batch document (YAML or JSON with a
                ``jobs:`` list) as text or as the path of its file.
            idempotency_key, submit_dir: as for submit(); the key covers the whole batch.
        """
        directory = _submit_dir(submit_dir)
        if isinstance(specs, (str, bytes, os.PathLike)):
            body, content_type = _job_body(specs, directory)
        else:
            jobs = list(specs)
            for i, spec in enumerate(jobs):
                if not isinstance(spec, collections.abc.Mapping):
                    raise TypeError("submit_batch: jobs[%d] is a %s; give dicts, or the whole "
                                    "batch document (a `jobs:` list) as text or a path"
                                    % (i, type(spec).__name__))
            doc = {"jobs": [dict(spec) for spec in jobs]}
            if directory:
                doc["submit_dir"] = directory
            body = json.dumps(doc, allow_nan=False).encode("utf-8")
            content_type = "application/json"
        key = idempotency_key or new_idempotency_key()
        answer = self._post("/v1/jobs/batch", body, content_type, {"Idempotency-Key": key})
        ids = answer.json("POST /v1/jobs/batch").get("ids")
        if not isinstance(ids, list):
            raise TesseraError(answer.status, "Internal",
                               "the controller's answer to POST /v1/jobs/batch has no job ids")
        return ids

    def get(self, job):
        """The job with this id (an int, a string such as "12_3", or a Job) as a Job."""
        return Job(self._get("/v1/jobs/" + _job_ref(job)))

    def jobs(self, state=None, queue=None, tenant=None, all=False, limit=None):
        """Lists jobs, newest first, as a list of Job (what ``tessera jobs`` shows).

        Args:
            state: a state or a list of them ("pending", "running", "succeeded", ...);
                by default the unfinished ones (pending, running, stopping).
            queue, tenant: only jobs of this queue or tenant (a tenant sees its own).
            all: jobs in every state, finished ones too.
            limit: at most this many; by default every page the controller has.

        The controller keeps the newest finished jobs in memory (10,000 by default);
        older ones are found by get() only.
        """
        if limit is not None and limit < 1:
            raise ValueError("limit must be >= 1, got %r" % (limit,))
        query = {}
        if state:
            query["state"] = state if isinstance(state, str) else ",".join(state)
        elif not all:
            query["state"] = _ACTIVE_STATES
        if queue:
            query["queue"] = queue
        if tenant:
            query["tenant"] = tenant
        query["limit"] = str(min(limit or _MAX_PAGE, _MAX_PAGE))
        out = []
        after = None
        while True:
            page_query = dict(query)
            if after is not None:
                page_query["after"] = after
            page = self._get("/v1/jobs", page_query)
            out.extend(Job(j) for j in page.get("jobs") or [])
            nxt = page.get("next")
            if nxt in (None, "") or str(nxt) == after or (limit and len(out) >= limit):
                break
            after = str(nxt)
        return out[:limit] if limit else out

    def wait(self, job, timeout=None, poll=1.0):
        """Waits until the job has ended (succeeded, failed or cancelled); returns it.

        Raises TimeoutError when it has not ended within `timeout` seconds (None: no
        bound). A failed job is returned, not raised: look at ``job.state``,
        ``job.exit_code`` and ``job.reason``.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            current = self.get(job)
            if current.state in TERMINAL_STATES:
                return current
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("job %s is still %s after %s s"
                                       % (current.id, current.state, timeout))
                time.sleep(min(poll, left))
            else:
                time.sleep(poll)

    def cancel(self, job):
        """Cancels a job (a running one is stopped, with its grace period); returns it.

        A job that has already ended raises TesseraError with code "FailedPrecondition".
        """
        path = "/v1/jobs/%s/cancel" % _job_ref(job)
        return Job(self._post(path, b"", "application/json").json("POST " + path))

    def logs(self, job, task=0, follow=False, poll=0.5, timeout=None):
        """A task's output (stdout and stderr).

        Without `follow`, the output so far as one string. With `follow`, an iterator of
        text chunks as they come, ending when the job has ended and everything has been
        read (``tessera logs -f``), or after `timeout` seconds; it asks every `poll`
        seconds while nothing new came::

            for chunk in client.logs(job, follow=True):
                print(chunk, end="")
        """
        if isinstance(task, bool) or not isinstance(task, int) or task < 0:
            raise ValueError("task must be an int >= 0, got %r" % (task,))
        chunks = _LogReader(self, _job_ref(job), task)
        if follow:
            return chunks.follow(poll, timeout)
        return "".join(chunks.read_all())

    # ----------------------------------------------------------------------------
    # the cluster

    def usage(self, since="24h", until="now", by="tenant"):
        """GPU-hours between two times, as ``tessera usage`` shows (GET /v1/usage).

        Args:
            since, until: "now" (for until, None too: the controller's now); a duration
                ago ("90s", "30m", "24h", "7d", "2w"); a date or RFC 3339 time
                ("2026-11-01", "2026-11-01T09:00:00Z"); a datetime (naive ones are local
                time); or a timedelta ago.
            by: "tenant", "queue" or "job" (a tenant sees its own usage only).

        Returns the API's dict: ``{"by", "since", "until", "rows": [{"key", "jobs",
        "gpu_hours", "used_gpu_hours", "measured_gpu_hours", "efficiency"}, ...]}``.
        """
        now = datetime.datetime.now(datetime.timezone.utc)
        query = {"since": _time_arg(since, now, "since"), "by": by}
        # "now" is left to the controller: this clock's whole second may be before a job
        # that ended a moment ago.
        if until is not None and until != "now":
            query["until"] = _time_arg(until, now, "until")
        return self._get("/v1/usage", query)

    def nodes(self):
        """The nodes (a list of dicts: name, state, GPUs with their holders, drains...)."""
        return self._get("/v1/nodes").get("nodes", [])

    def queues(self):
        """The queues (a list of dicts: name, kind, tenant, quotas with what is in use,
        pending and running counts, fair share)."""
        return self._get("/v1/queues").get("queues", [])


class _LogReader:
    """Reads one task's log from an offset, decoding UTF-8 across chunk boundaries."""

    def __init__(self, client, ref, task):
        self._client = client
        self._path = "/v1/jobs/%s/logs" % ref
        self._task = task
        self._offset = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def _read(self):
        """(text, progress, job state) of one request."""
        query = {"task": str(self._task), "offset": str(self._offset)}
        path = self._path + "?" + urllib.parse.urlencode(query)
        answer = self._client._transport.request("GET", path)
        try:
            nxt = int(answer.header("x-log-offset"))
        except ValueError:
            nxt = -1
        if nxt < 0:
            nxt = self._offset + len(answer.body)
        # Bytes that do not move the offset are not progress: a broken server must not
        # make us return the same bytes forever.
        progress = bool(answer.body) and nxt > self._offset
        self._offset = nxt
        return self._decoder.decode(answer.body), progress, answer.header("x-job-state")

    def read_all(self):
        while True:
            text, progress, _ = self._read()
            yield text
            if not progress:
                break
        yield self._decoder.decode(b"", final=True)

    def follow(self, poll, timeout):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            text, progress, state = self._read()
            if text:
                yield text
            if progress:
                continue
            if state in TERMINAL_STATES or (deadline is not None and
                                            time.monotonic() >= deadline):
                break
            time.sleep(poll)
        rest = self._decoder.decode(b"", final=True)
        if rest:
            yield rest


def _job_ref(job):
    """A job id as it goes in a URL path: 12, "12", "12_3", or a Job's id."""
    if isinstance(job, collections.abc.Mapping):
        job = job.get("id")
    if isinstance(job, bool) or not isinstance(job, (int, str)):
        raise TypeError("a job id is an int or a string such as '12_3', got %r" % (job,))
    text = str(job).strip()
    if not text or (isinstance(job, int) and job <= 0):
        raise ValueError("not a job id: %r" % (job,))
    return urllib.parse.quote(text, safe="")


def _submit_dir(given):
    if given is None:
        try:
            return os.getcwd()
        except OSError:
            return ""
    return given or ""


def _read_job_file(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _job_body(spec, submit_dir):
    """(body bytes, content type) for a job or batch given as a dict, text or path."""
    if isinstance(spec, collections.abc.Mapping):
        doc = dict(spec)
        if submit_dir and "submit_dir" not in doc:
            doc["submit_dir"] = submit_dir
        return json.dumps(doc, allow_nan=False).encode("utf-8"), "application/json"
    is_json = False
    if isinstance(spec, os.PathLike):
        path = os.fspath(spec)
        text, is_json = _read_job_file(path), str(path).endswith(".json")
    elif isinstance(spec, bytes):
        text = spec.decode("utf-8")
    elif isinstance(spec, str):
        text = spec
        one_line = "\n" not in spec.strip()
        if one_line and os.path.isfile(spec):
            text, is_json = _read_job_file(spec), spec.endswith(".json")
        elif one_line and spec.strip().endswith(_JOB_FILE_SUFFIXES) and ":" not in spec:
            raise FileNotFoundError("no job file %r" % spec)
    else:
        raise TypeError("a job is a dict, YAML or JSON text, or a job file's path; got %s"
                        % type(spec).__name__)
    if not text.strip():
        raise ValueError("the job is empty")
    if is_json or text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None  # sent as written: the controller says what is wrong, and where
        if isinstance(doc, dict):
            return _job_body(doc, submit_dir)
        return text.encode("utf-8"), "application/json"
    if submit_dir:
        text = _yaml_with_field(text, "submit_dir", submit_dir)
    return text.encode("utf-8"), "application/yaml"


_TOP_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*[ \t]*:([ \t]|$)")


def _yaml_with_field(text, key, value):
    """`text` with "key: value" added at its end when that is safe: a document that is
    one block mapping at column 0 without the key. Otherwise `text` as it was."""
    lines = text.splitlines()
    content = [l for l in lines if l.strip() and not l.lstrip().startswith("#")]
    if not content or not _TOP_KEY.match(content[0]):
        return text
    if any(l.startswith(("---", "...", "%")) for l in lines):
        return text
    if any(re.match(r"^%s[ \t]*:" % re.escape(key), l) for l in lines):
        return text
    return text + ("" if text.endswith("\n") else "\n") + "%s: %s\n" % (key, json.dumps(value))


def _time_arg(value, now, name):
    """An RFC 3339 time for `since`/`until` (see Client.usage)."""
    if isinstance(value, datetime.timedelta):
        value = now - value
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if not isinstance(value, str):
        raise TypeError("%s: expected a string, datetime or timedelta, got %r" % (name, value))
    text = value.strip()
    if text == "now":
        return _time_arg(now, now, name)
    match = _DURATION.match(text)
    if match:
        seconds = int(match.group(1)) * _DURATION_SECONDS[match.group(2)]
        return _time_arg(datetime.timedelta(seconds=seconds), now, name)
    if re.match(r"^\d{4}-\d{2}-\d{2}", text):
        return text  # the controller parses dates and RFC 3339 times
    raise ValueError("%s: expected now, a duration ago (24h, 7d), a date or an RFC 3339 time; "
                     "got %r" % (name, value))
