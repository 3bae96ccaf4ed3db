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

Prints jobs/s per phase and run, and the median over runs. With --slurm, the same phases
run against a Slurm already configured on this machine (sbatch, squeue and scancel on
PATH, 8 GPUs as gres on one node), alternating with Tessera, and the ratio is printed.

Usage: bench/cluster_throughput.py [--tessera build/tessera] [--jobs 1000] [--mixed 500]
                                   [--runs 3] [--rest 0] [--keep] [--slurm]
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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Tessera:
    name = "tessera"

    def __init__(self, binary):
        self.binary = os.path.abspath(binary)
        self.dir = tempfile.mkdtemp(prefix="tessera-bench-")
        os.chmod(self.dir, 0o711)  # tasks run as their tenant's uid and must reach it
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.dir, "up.log"), "w")
        self.proc = subprocess.Popen(
            [self.binary, "up", "--data", os.path.join(self.dir, "data"),
             "--listen", f"127.0.0.1:{self.port}", "--fake-gpus", "1x8xH100-80GB"],
            stdout=self.log, stderr=subprocess.STDOUT)
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
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        # Removed only once every run is done (main): a run's data is thousands of
        # inodes, and on a file system that does not soon reuse freed inodes (ext4
        # without a journal) freeing them would slow every file creation of the next run.
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


def run_phases(cluster, args, run, latencies):
    figures = {
        "one-by-one": one_by_one(cluster, args.jobs, latencies),
        "drain": drain(cluster, args.jobs),
        "mixed": mixed(cluster, args.mixed, seed=run),
    }
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
    p.add_argument("--keep", action="store_true",
                   help="leave the runs' data directories (and print where), e.g. for "
                        "invocations in a row: removing them slows the next run's file "
                        "creations where freed inodes are not soon reused")
    p.add_argument("--rest", type=float, default=0,
                   help="seconds to stay idle before each run (file systems that delay "
                        "reusing deleted inodes make back-to-back runs slower)")
    args = p.parse_args()
    global KEEP
    KEEP = args.keep
    if args.jobs < 1 or args.mixed < 1 or args.runs < 1 or args.rest < 0:
        p.error("--jobs, --mixed and --runs must be positive, --rest not negative")

    results = {"tessera": [], "slurm": []}
    for run in range(args.runs):
        systems = ["tessera"] + (["slurm"] if args.slurm else [])
        if run % 2 == 1:
            systems.reverse()  # alternate which goes first
        for system in systems:
            time.sleep(args.rest)
            cluster = Tessera(args.tessera) if system == "tessera" else Slurm()
            latencies = []
            try:
                figures = run_phases(cluster, args, run, latencies)
            finally:
                cluster.close()
            results[system].append(figures)
            print(f"run {run + 1} {system:8s} " +
                  "  ".join(f"{k} {v:7.1f} jobs/s" for k, v in figures.items()) +
                  f"  (one-by-one submit p50 {percentile(latencies, 0.5) * 1e3:.2f} ms, "
                  f"p99 {percentile(latencies, 0.99) * 1e3:.2f} ms)", flush=True)

    print(f"\nmedian of {args.runs} runs, jobs/s "
          f"({args.jobs} one-GPU jobs; {args.mixed} mixed 1/2/8-GPU jobs; 8 GPUs):")
    print(f"{'phase':12s} {'tessera':>9s}" + (f" {'slurm':>9s} {'ratio':>7s}" if args.slurm else ""))
    for phase in ("one-by-one", "drain", "mixed"):
        t = statistics.median(r[phase] for r in results["tessera"])
        line = f"{phase:12s} {t:9.1f}"
        if args.slurm:
            s = statistics.median(r[phase] for r in results["slurm"])
            line += f" {s:9.1f} {t / s:7.2f}"
        print(line)
    return 0


if __name__ == "__main__":
    try:
        rc = main()
    finally:
        for path in LEFT_BEHIND:
            if KEEP:
                print("left " + path)
            else:
                shutil.rmtree(path, ignore_errors=True)
    sys.exit(rc)
