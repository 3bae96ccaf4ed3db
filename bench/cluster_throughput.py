#!/usr/bin/env python3
"""End-to-end job throughput of a one-machine cluster, phase by phase.

Starts `tessera up` with 8 fake GPUs in a scratch directory (store fsync on, the
defaults of `up`), and measures, with every job a `true` command:

  one-by-one  N one-GPU jobs, each submitted by its own `tessera submit` call, one after
              another; first submit to last completion.
  drain       N one-GPU jobs queued behind an 8-GPU job that holds every GPU; from the
              moment that job is cancelled to the last completion.
  mixed       M jobs of 1, 2 or 8 GPUs (seeded), one CLI call each; first submit to last
              completion.
  array       a job array of N one-GPU elements submitted in one call
              (`sbatch --array=0-(N-1) --gres=gpu:1 -o /dev/null --wrap true`, the same
              options to `tessera sbatch`); from the call to the last completion.
              --array-output PATTERN replaces /dev/null (e.g. slurm-%A_%a.out, written
              in the current directory).

Prints jobs/s per phase and run, and the median over runs. With --slurm, the same phases
run against a Slurm already configured on this machine (sbatch, squeue and scancel on
PATH, 8 GPUs as gres on one node), alternating with Tessera, and the ratio is printed.

With --store sqlite or --store etcd the controller and the agent are separate processes
instead, as on a real cluster: `tessera server` (on SQLite in its data directory, or on a
3-member etcd it starts on free loopback ports: `etcd` on PATH or --etcd, heartbeat 50 ms,
election timeout 500 ms, --max-txn-ops 10000, --max-request-bytes 33554432, data in the
scratch directory) and one `tessera agent` with 8 fake GPUs (heartbeat 200 ms, as `up`
sets it). --compare-stores runs both, alternating which goes first, and prints etcd's
figures against SQLite's.

Usage: bench/cluster_throughput.py [--tessera build/tessera] [--jobs 1000] [--mixed 500]
                                   [--runs 3] [--rest 0] [--keep] [--slurm]
                                   [--store up|sqlite|etcd] [--compare-stores] [--etcd PATH]
Standard library only.
"""
import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


LEFT_BEHIND = []  # data directories of runs that ended, removed at exit
KEEP = False  # --keep: leave them
STARTED = []  # every process started, stopped at exit if still running


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args, log):
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    STARTED.append(proc)
    return proc


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Tessera:
    name = "tessera"

    def __init__(self, binary):
        self.binary = os.path.abspath(binary)
        self.dir = tempfile.mkdtemp(prefix="tessera-bench-")
        os.chmod(self.dir, 0o711)  # tasks run as their tenant's uid and must reach it
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.dir, "up.log"), "w")
        self.proc = start(
            [self.binary, "up", "--data", os.path.join(self.dir, "data"),
             "--listen", f"127.0.0.1:{self.port}", "--fake-gpus", "1x8xH100-80GB"], self.log)
        data = os.path.join(self.dir, "data")
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if self._get("/healthz", None).get("status") == "ok" and \
                        os.path.exists(os.path.join(data, "tokens", "team-a.token")):
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError("tessera up did not come up; see " + self.log.name)
        with open(os.path.join(data, "admin.token")) as f:
            self.admin = f.read().strip()
        with open(os.path.join(data, "tokens", "team-a.token")) as f:
            self.tenant = f.read().strip()
        self.env = dict(os.environ, TESSERA_SERVER=self.url, TESSERA_TOKEN=self.tenant)
        self._wait_node()

    def _get(self, path, token):
        req = urllib.request.Request(self.url + path)
        if token:
            req.add_header("Authorization", "Bearer " + token)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def _wait_node(self):
        deadline = time.time() + 60
        while time.time() < deadline:
            nodes = self._get("/v1/nodes", self.admin).get("nodes", [])
            if nodes and nodes[0].get("state", "up") == "up":
                return
            time.sleep(0.1)
        raise RuntimeError("the agent did not register")

    def submit(self, gpus, command=("true",)):
        out = subprocess.run([self.binary, "submit", "--gpus", str(gpus), "--", *command],
                             env=self.env, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError("submit failed: " + out.stderr)
        return out.stdout.strip()

    def submit_array(self, n, output):
        out = subprocess.run([self.binary, "sbatch", "--parsable", f"--array=0-{n - 1}",
                              "--gres=gpu:1", "-o", output, "--wrap", "true"],
                             env=self.env, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError("sbatch failed: " + out.stderr)
        return out.stdout.strip()

    def cancel(self, job):
        out = subprocess.run([self.binary, "cancel", job], env=self.env, capture_output=True,
                             text=True)
        if out.returncode != 0:
            raise RuntimeError("cancel failed: " + out.stderr)

    def running(self, job):
        return self._get(f"/v1/jobs/{job}", self.admin).get("state") == "running"

    def busy(self):
        page = self._get("/v1/jobs?state=pending,running&limit=1", self.admin)
        return len(page.get("jobs", [])) > 0

    def failures(self):
        page = self._get("/v1/jobs?state=failed&limit=1", self.admin)
        return [j.get("reason", "") for j in page.get("jobs", [])]

    def close(self):
        stop(self.proc)
        # Removed only once every run is done (main): a run's data is thousands of
        # inodes, and on a file system that does not soon reuse freed inodes (ext4
        # without a journal) freeing them would slow every file creation of the next run.
        LEFT_BEHIND.append(self.dir)


class Etcd:
    """A 3-member etcd cluster on free loopback ports, its data under `dir`."""

    def __init__(self, binary, dir, members=3):
        self.procs = []
        peers = [(f"m{i}", free_port(), free_port()) for i in range(members)]
        self.endpoints = ",".join(f"127.0.0.1:{client}" for _, client, _ in peers)
        initial = ",".join(f"{name}=http://127.0.0.1:{peer}" for name, _, peer in peers)
        token = f"tessera-bench-{os.getpid()}-{peers[0][1]}"  # the same for every member
        for name, client, peer in peers:
            log = open(os.path.join(dir, f"etcd-{name}.log"), "w")
            self.procs.append(start([
                binary, "--name", name, "--data-dir", os.path.join(dir, f"etcd-{name}"),
                "--listen-client-urls", f"http://127.0.0.1:{client}",
                "--advertise-client-urls", f"http://127.0.0.1:{client}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", initial, "--initial-cluster-state", "new",
                "--initial-cluster-token", token,
                "--heartbeat-interval", "50", "--election-timeout", "500",
                "--max-txn-ops", "10000", "--max-request-bytes", "33554432"], log))
        deadline = time.time() + 60
        for _, client, _ in peers:
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{client}/health",
                                                timeout=2) as r:
                        if json.loads(r.read()).get("health") == "true":
                            break
                except OSError:
                    pass
                if time.time() > deadline or any(p.poll() is not None for p in self.procs):
                    self.close()
                    raise RuntimeError("etcd did not come up; see " + dir + "/etcd-*.log")
                time.sleep(0.1)

    def close(self):
        for p in self.procs:
            stop(p)


class TesseraServer(Tessera):
    """`tessera server` (on SQLite, or on etcd) and one `tessera agent`, two processes."""

    def __init__(self, binary, store, etcd_binary):
        self.binary = os.path.abspath(binary)
        self.name = store
        self.dir = tempfile.mkdtemp(prefix=f"tessera-bench-{store}-")
        os.chmod(self.dir, 0o711)  # tasks run as their tenant's uid and must reach it
        self.etcd, self.server, self.agent = None, None, None
        try:
            self._start(store, etcd_binary)
        except BaseException:
            self.close()
            raise

    def _start(self, store, etcd_binary):
        self.port, agent_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        data = os.path.join(self.dir, "data")
        # Jobs' checkpoint directories, as several controllers on etcd need them: one
        # place for all (mode 0711: tasks run as other uids).
        checkpoints = os.path.join(self.dir, "checkpoints")
        os.mkdir(checkpoints)
        os.chmod(checkpoints, 0o711)
        args = [self.binary, "server", "--data", data, "--listen", f"127.0.0.1:{self.port}",
                "--agent-port", str(agent_port), "--checkpoint-root", checkpoints]
        if store == "etcd":
            self.etcd = Etcd(etcd_binary, self.dir)
            args += ["--store", "etcd://" + self.etcd.endpoints]
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        self.server = start(args, self.log)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                health = self._get("/healthz", None)
                if health.get("status") == "ok" and health.get("role", "leader") == "leader" \
                        and os.path.exists(os.path.join(data, "join.token")):
                    break
            except OSError:
                pass
            if self.server.poll() is not None:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("tessera server did not lead; see " + self.log.name)
        if self.server.poll() is not None:
            raise RuntimeError("tessera server exited; see " + self.log.name)
        with open(os.path.join(data, "admin.token")) as f:
            self.admin = f.read().strip()
        self.tenant = self._post("/v1/tenants", {"name": "team-a"}, self.admin)["token"]
        self.env = dict(os.environ, TESSERA_SERVER=self.url, TESSERA_TOKEN=self.tenant)
        # As `tessera up` configures its agent: fake GPUs with a fake server's CPUs and
        # memory, heartbeats every 200 ms.
        self.agent = start([
            self.binary, "agent", "--server", self.url,
            "--token-file", os.path.join(data, "join.token"), "--node", "n1",
            "--data", os.path.join(self.dir, "agent"), "--fake-gpus", "8xH100-80GB",
            "--heartbeat", "200ms", "--cpu", "64", "--memory", "512GiB"],
            open(os.path.join(self.dir, "agent.log"), "w"))
        self._wait_node()

    def _post(self, path, body, token):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer " + token})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def close(self):
        # The agent first (it would otherwise retry a controller that is gone), etcd last.
        for part in (self.agent, self.server):
            if part is not None:
                stop(part)
        if self.etcd is not None:
            self.etcd.close()
        LEFT_BEHIND.append(self.dir)


class Slurm:
    name = "slurm"

    def __init__(self):
        for tool in ("sbatch", "squeue", "scancel"):
            if shutil.which(tool) is None:
                raise RuntimeError(tool + " not found: install and configure slurm-wlm")

    def submit(self, gpus, command=("true",)):
        out = subprocess.run(["sbatch", "--parsable", f"--gres=gpu:{gpus}", "-o", "/dev/null",
                              "--wrap", " ".join(command)], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError("sbatch failed: " + out.stderr)
        return out.stdout.strip().split(";")[0]

    def submit_array(self, n, output):
        out = subprocess.run(["sbatch", "--parsable", f"--array=0-{n - 1}", "--gres=gpu:1",
                              "-o", output, "--wrap", "true"], capture_output=True,
                             text=True)
        if out.returncode != 0:
            raise RuntimeError("sbatch failed: " + out.stderr)
        return out.stdout.strip().split(";")[0]

    def cancel(self, job):
        subprocess.run(["scancel", job], check=True)

    def running(self, job):
        out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True,
                             text=True)
        return out.stdout.strip() == "RUNNING"

    def busy(self):
        out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True)
        return out.stdout.strip() != ""

    def failures(self):
        return []

    def close(self):
        pass


def wait_idle(cluster, limit=600):
    deadline = time.time() + limit
    while cluster.busy():
        if time.time() > deadline:
            raise RuntimeError("jobs still pending or running after %d s" % limit)
        time.sleep(0.005)
    return time.time()


def one_by_one(cluster, n, latencies):
    start = time.time()
    for _ in range(n):
        t = time.perf_counter()
        cluster.submit(1)
        latencies.append(time.perf_counter() - t)
    return n / (wait_idle(cluster) - start)


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def drain(cluster, n):
    blocker = cluster.submit(8, ("sleep", "3600"))
    deadline = time.time() + 60
    while not cluster.running(blocker):
        if time.time() > deadline:
            raise RuntimeError("the 8-GPU job did not start")
        time.sleep(0.01)
    for _ in range(n):
        cluster.submit(1)
    start = time.time()
    cluster.cancel(blocker)
    return n / (wait_idle(cluster) - start)


def mixed(cluster, n, seed):
    rng = random.Random(seed)
    sizes = [rng.choice((1, 2, 8)) for _ in range(n)]
    start = time.time()
    for gpus in sizes:
        cluster.submit(gpus)
    return n / (wait_idle(cluster) - start)


def array(cluster, n, output):
    start = time.time()
    cluster.submit_array(n, output)
    return n / (wait_idle(cluster) - start)


PHASES = ("one-by-one", "drain", "mixed", "array")


def run_phases(cluster, args, run, latencies):
    phases = {
        "one-by-one": lambda: one_by_one(cluster, args.jobs, latencies),
        "drain": lambda: drain(cluster, args.jobs),
        "mixed": lambda: mixed(cluster, args.mixed, seed=run),
        "array": lambda: array(cluster, args.jobs, args.array_output),
    }
    figures = {name: phases[name]() for name in args.phases}
    failed = cluster.failures()
    if failed:
        raise RuntimeError("jobs failed, e.g.: " + failed[0])
    return figures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tessera", default="build/tessera")
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--mixed", type=int, default=500)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--slurm", action="store_true", help="also run the phases on Slurm")
    p.add_argument("--array-output", default="/dev/null",
                   help="the array phase's -o (default /dev/null; e.g. slurm-%%A_%%a.out)")
    p.add_argument("--phases", default=",".join(PHASES),
                   help="comma-separated phases to run (default: all): " + ", ".join(PHASES))
    p.add_argument("--store", choices=("up", "sqlite", "etcd"), default="up",
                   help="up: `tessera up` (SQLite, one process); sqlite or etcd: `tessera "
                        "server` on that store and a `tessera agent`")
    p.add_argument("--compare-stores", action="store_true",
                   help="run --store sqlite and --store etcd alternately, and compare")
    p.add_argument("--etcd", default=shutil.which("etcd") or "etcd",
                   help="the etcd binary (default: etcd on PATH)")
    p.add_argument("--keep", action="store_true",
                   help="leave the runs' data directories (and print where), e.g. for "
                        "invocations in a row: removing them slows the next run's file "
                        "creations where freed inodes are not soon reused")
    p.add_argument("--rest", type=float, default=0,
                   help="seconds to stay idle before each run (file systems that delay "
                        "reusing deleted inodes make back-to-back runs slower)")
    args = p.parse_args()
    args.phases = [x for x in args.phases.split(",") if x]
    if not args.phases or any(x not in PHASES for x in args.phases):
        p.error("--phases: choose from " + ", ".join(PHASES))
    global KEEP
    KEEP = args.keep
    if args.jobs < 1 or args.mixed < 1 or args.runs < 1 or args.rest < 0:
        p.error("--jobs, --mixed and --runs must be positive, --rest not negative")

    names = {"up": "tessera", "sqlite": "sqlite", "etcd": "etcd"}
    compared = ["sqlite", "etcd"] if args.compare_stores else [names[args.store]]
    if args.slurm:
        compared.append("slurm")
    results = {system: [] for system in compared}
    for run in range(args.runs):
        systems = list(compared)
        if run % 2 == 1:
            systems.reverse()  # alternate which goes first
        for system in systems:
            time.sleep(args.rest)
            if system == "tessera":
                cluster = Tessera(args.tessera)
            elif system == "slurm":
                cluster = Slurm()
            else:
                cluster = TesseraServer(args.tessera, system, args.etcd)
            latencies = []
            try:
                figures = run_phases(cluster, args, run, latencies)
            finally:
                cluster.close()
            results[system].append(figures)
            print(f"run {run + 1} {system:8s} " +
                  "  ".join(f"{k} {v:7.1f} jobs/s" for k, v in figures.items()) +
                  (f"  (one-by-one submit p50 {percentile(latencies, 0.5) * 1e3:.2f} ms, "
                   f"p99 {percentile(latencies, 0.99) * 1e3:.2f} ms)" if latencies else ""),
                  flush=True)

    # A ratio column: etcd against SQLite, or Tessera against Slurm.
    ratio = ("etcd", "sqlite") if args.compare_stores else \
        (compared[0], "slurm") if args.slurm else None
    print(f"\nmedian of {args.runs} runs, jobs/s "
          f"({args.jobs} one-GPU jobs and array elements; {args.mixed} mixed 1/2/8-GPU "
          f"jobs; 8 GPUs):")
    print(f"{'phase':12s}" + "".join(f" {system:>9s}" for system in compared) +
          (f" {ratio[0] + '/' + ratio[1]:>13s}" if ratio else ""))
    for phase in args.phases:
        medians = {system: statistics.median(r[phase] for r in results[system])
                   for system in compared}
        line = f"{phase:12s}" + "".join(f" {medians[system]:9.1f}" for system in compared)
        if ratio:
            line += f" {medians[ratio[0]] / medians[ratio[1]]:13.2f}"
        print(line)
    return 0


if __name__ == "__main__":
    rc = 1
    try:
        rc = main()
    finally:
        for proc in STARTED:  # a run that failed half-way
            stop(proc)
        for path in LEFT_BEHIND:
            if KEEP:
                print("left " + path)
            else:
                shutil.rmtree(path, ignore_errors=True)
    sys.exit(rc)
