#!/usr/bin/env python3
"""One tenant floods the controller with pending jobs; does another tenant notice?

Starts `tessera up` in a scratch directory with one fake H100 (store fsync on), fills the
GPU with one long job of tenant team-b, then runs two phases of --seconds each:

  quiet  tenant team-b alone: one thread submits a one-GPU job and one lists its jobs
         (GET /v1/jobs?limit=100), each 5 times a second on a keep-alive connection;
  flood  the same, while tenant team-a creates pending jobs as fast as it is answered
         from three threads: arrays of 1,000 (POST /v1/jobs with "array": "0-999"),
         batches of 1,000 (POST /v1/jobs/batch) and single submissions; a 429 is
         retried at once (an abusive client ignores Retry-After). The flood runs in a
         process of its own (as another tenant's client would): in team-b's process its
         threads would hold Python's interpreter lock, and team-b's latencies would
         measure that lock rather than the controller.

Then it stops the controller with SIGTERM and starts it again on the same data, and times
the restart (until /healthz answers and team-b's listing works).

Prints, per phase, team-b's p50/p99 latency and errors, then team-a's jobs made and
requests refused (429), the pending jobs, the controller's RSS (VmRSS of the `tessera up`
process, controller and agent) in the quiet phase and at the end of the flood, the RSS
per pending job made, and the restart time. Goal: team-b's p99 within 2x of quiet.

Usage: bench/pending_flood_bench.py [--tessera build/release/tessera] [--seconds 60]
                                    [--keep] [--up-arg=ARG ...]
Standard library only.
"""
import argparse
import http.client
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


class Conn:
    """One keep-alive connection of one token."""

    def __init__(self, port, token):
        self.port, self.token = port, token
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method, path, body=None):
        headers = {"Authorization": "Bearer " + self.token}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in range(2):
            try:
                self.c.request(method, path, body=data, headers=headers)
                r = self.c.getresponse()
                return r.status, r.read()
            except (http.client.HTTPException, OSError):
                self.c.close()
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                if attempt == 1:
                    return 0, b""
        return 0, b""


def wait_healthy(port, timeout):
    end = time.time() + timeout
    while time.time() < end:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return True
        except OSError:
            pass
        time.sleep(0.02)
    return False


ONE_GPU = {"command": ["true"], "resources": {"gpus": 1}}


def probe(port, token, seconds, out, stop):
    """team-b: a submission and a listing, each 5 times a second; latencies in ms (and
    when each was sent, in out["at"], for the p99 by 10 s of the phase)."""

    def loop(kind):
        c = Conn(port, token)
        end = time.time() + seconds
        nxt = time.time()
        while time.time() < end and not stop.is_set():
            t0 = time.perf_counter()
            if kind == "submit":
                status, _ = c.call("POST", "/v1/jobs", ONE_GPU)
                ok = status in (200, 201)
            else:
                status, _ = c.call("GET", "/v1/jobs?limit=100")
                ok = status == 200
            took = (time.perf_counter() - t0) * 1000.0
            out[kind].append(took)
            out["at"].append((time.time() - (end - seconds), took))
            if not ok:
                out["errors"] += 1
            nxt += 0.2
            time.sleep(max(0.0, nxt - time.time()))

    threads = [threading.Thread(target=loop, args=(k,)) for k in ("submit", "list")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def flood(port, token, seconds, tally):
    """team-a: pending jobs as fast as it is answered, three ways at once (each body
    serialised once, as a client replaying one request would)."""
    bodies = {
        "array": (json.dumps(dict(ONE_GPU, array="0-999")).encode(), "/v1/jobs", 1000),
        "batch": (json.dumps({"jobs": [ONE_GPU] * 1000}).encode(), "/v1/jobs/batch", 1000),
        "single": (json.dumps(ONE_GPU).encode(), "/v1/jobs", 1),
    }
    lock = threading.Lock()
    counts = {"made": 0, "refused": 0, "other": 0}  # into `tally` (shared) at the end

    def loop(kind):
        c = Conn(port, token)
        end = time.time() + seconds
        body, path, n = bodies[kind]
        while time.time() < end:
            status, _ = c.call("POST", path, body)
            with lock:
                if status in (200, 201):
                    counts["made"] += n
                elif status == 429:
                    counts["refused"] += 1
                else:
                    counts["other"] += 1

    threads = [threading.Thread(target=loop, args=(k,)) for k in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tally.update(counts)


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(p / 100.0 * len(v)))]


def start_up(tessera, data, port, log, extra=()):
    return subprocess.Popen(
        [tessera, "up", "--data", data, "--listen", f"127.0.0.1:{port}",
         "--fake-gpus", "1xH100-80GB", *extra],
        stdout=log, stderr=subprocess.STDOUT)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tessera", default="build/release/tessera")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--up-arg", action="append", default=[],
                    help="one more argument of `tessera up` (e.g. --up-arg=--refusal-pause=0)")
    args = ap.parse_args()
    tessera = os.path.abspath(args.tessera)
    scratch = tempfile.mkdtemp(prefix="tessera-flood-")
    os.chmod(scratch, 0o711)
    data = os.path.join(scratch, "data")
    port = free_port()
    log = open(os.path.join(scratch, "up.log"), "ab")
    up = start_up(tessera, data, port, log, args.up_arg)
    try:
        if not wait_healthy(port, 60):
            sys.exit("tessera up did not answer; see " + scratch + "/up.log")
        def tok(tenant):
            # `tessera up` writes the tenants' tokens just after /healthz first answers.
            path = os.path.join(data, "tokens", tenant + ".token")
            end = time.time() + 30
            while not os.path.exists(path) and time.time() < end:
                time.sleep(0.05)
            return open(path).read().strip()

        team_a, team_b = tok("team-a"), tok("team-b")
        # The GPU is held by team-b's long job: everything after it stays pending.
        b = Conn(port, team_b)
        status, body = b.call("POST", "/v1/jobs", {"command": ["sleep", "100000"],
                                                   "resources": {"gpus": 1}})
        assert status == 201, body
        time.sleep(2)

        quiet = {"submit": [], "list": [], "errors": 0, "at": []}
        probe(port, team_b, args.seconds, quiet, threading.Event())
        rss_quiet = rss_mib(up.pid)

        loud = {"submit": [], "list": [], "errors": 0, "at": []}
        tally = multiprocessing.Manager().dict(made=0, refused=0, other=0)
        flooder = multiprocessing.Process(target=flood,
                                          args=(port, team_a, args.seconds, tally))
        flooder.start()
        probe(port, team_b, args.seconds, loud, threading.Event())
        flooder.join()
        rss_flood = rss_mib(up.pid)
        admin = open(os.path.join(data, "admin.token")).read().strip()
        a_pending = 0
        status, body = Conn(port, admin).call("GET", "/v1/queues")
        for q in json.loads(body).get("queues", []) if status == 200 else []:
            if q.get("name") == "team-a":
                a_pending = q.get("pending", 0)

        # Restart on the same data: until /healthz answers and team-b can list.
        up.terminate()
        up.wait(timeout=120)
        t0 = time.time()
        up = start_up(tessera, data, port, log, args.up_arg)
        healthy = wait_healthy(port, 600)
        listed = False
        while healthy and not listed and time.time() - t0 < 600:
            listed = Conn(port, team_b).call("GET", "/v1/jobs?limit=1")[0] == 200
        restart_s = time.time() - t0

        def line(name, r):
            allr = r["submit"] + r["list"]
            return (f"{name:6s} team-b submit p50 {pct(r['submit'], 50):7.1f} ms p99 "
                    f"{pct(r['submit'], 99):7.1f} ms | list p50 {pct(r['list'], 50):7.1f} ms "
                    f"p99 {pct(r['list'], 99):7.1f} ms | all p99 {pct(allr, 99):7.1f} ms | "
                    f"{len(allr)} requests, {r['errors']} errors")

        print(line("quiet", quiet))
        print(line("flood", loud))
        q99 = pct(quiet["submit"] + quiet["list"], 99)
        f99 = pct(loud["submit"] + loud["list"], 99)
        print(f"team-b p99 ratio flood/quiet: {f99 / q99:.2f} (goal <= 2)")
        buckets = {}
        for at, took in loud["at"]:
            buckets.setdefault(int(at // 10) * 10, []).append(took)
        print("flood p99 by 10 s: " + ", ".join(
            f"{k}-{k + 10} s {pct(v, 99):.0f} ms" for k, v in sorted(buckets.items())))
        print(f"team-a: {tally['made']} jobs made, {tally['refused']} requests refused (429), "
              f"other answers {tally['other']}; team-a pending at the end: {a_pending}")
        made = max(tally["made"], 1)
        print(f"RSS: quiet {rss_quiet:.1f} MiB, after the flood {rss_flood:.1f} MiB, "
              f"{(rss_flood - rss_quiet) * 1024 * 1024 / made:.0f} bytes per pending job made")
        print(f"restart with {tally['made'] + 1} pending jobs: {restart_s:.2f} s "
              f"(healthy {healthy}, listed {listed})")
    finally:
        up.terminate()
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            up.kill()
        if args.keep:
            print("kept " + scratch)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
