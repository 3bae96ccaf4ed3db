"""The Slurm scripts of examples/slurm, unchanged, on a one-machine cluster.

Starts `tessera up` (8 fake H100s) on a free loopback port in a scratch directory, copies
the example scripts into a working directory and submits them with `tessera sbatch` as a
Slurm user would: the data-parallel training script (torchrun through srun), the
learning-rate sweep (a 10-element array, at most 4 at once) and the two-step pipeline
(pipeline.sh, the second step afterok on the first), once succeeding and once with a
failing first step. `python` and `torchrun` are stand-ins on PATH (the job's environment
is the submitter's, as with sbatch's --export=ALL) that record their arguments, the
SLURM_* variables they see and when they ran.

TESSERA_BIN names the binary (ctest passes the build's); without it the tests fail.
Standard library only.
"""

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "slurm")

# Records what it was run with; `python` fails when the step it runs is told to.
STAND_IN = r"""#!/bin/bash
name=$(basename "$0")
rec="records/$name-${SLURM_JOB_ID}-${SLURM_PROCID}.json"
start=$(date +%s.%N)
[ "$name" = python ] && [ "$2" != "" ] && sleep 0.3
{
  printf '{"tool": "%s", "args": "%s", "start": %s, "end": %s, "cwd": "%s", "env": {' \
    "$name" "$*" "$start" "$(date +%s.%N)" "$PWD"
  first=1
  while IFS='=' read -r k v; do
    [ $first = 1 ] || printf ', '
    first=0
    printf '"%s": "%s"' "$k" "$v"
  done < <(env | grep -E '^(SLURM_[A-Z_]*|MASTER_ADDR|MASTER_PORT)=' | sort)
  printf '}}\n'
} > "$rec"
if [ "$name" = python ] && [ "$1" = preprocess.py ] && [ -n "${FAIL_PREPROCESS:-}" ]; then
  echo "preprocessing failed" >&2
  exit 4
fi
echo "$name ran: $*"
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class SlurmScriptsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        binary = os.environ.get("TESSERA_BIN", "")
        if not binary or not os.access(binary, os.X_OK):
            raise AssertionError("set TESSERA_BIN to the tessera binary (got %r)" % binary)
        cls.dir = tempfile.mkdtemp(prefix="tessera-slurm-")
        os.chmod(cls.dir, 0o711)  # tasks run as their tenant's uid
        cls.data = os.path.join(cls.dir, "data")
        cls.url = "http://127.0.0.1:%d" % free_port()
        cls.log = open(os.path.join(cls.dir, "up.log"), "w")
        cls.proc = subprocess.Popen(
            [binary, "up", "--data", cls.data, "--listen", cls.url[len("http://"):],
             "--fake-gpus", "8xH100-80GB", "--stop-grace", "2s", "--no-fsync"],
            stdout=cls.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_for("tessera up", cls._ready)
            with open(os.path.join(cls.data, "tokens", "team-a.token")) as f:
                cls.token = f.read().strip()
            wait_for("the agent", lambda: cls.api("/v1/nodes")["nodes"])
        except BaseException:
            cls.tearDownClass()
            raise
        # The user's side: a bin directory with tessera and the stand-ins, first on PATH.
        cls.bin = os.path.join(cls.dir, "bin")
        os.mkdir(cls.bin)
        os.symlink(os.path.abspath(binary), os.path.join(cls.bin, "tessera"))
        for tool in ("python", "torchrun"):
            path = os.path.join(cls.bin, tool)
            with open(path, "w") as f:
                f.write(STAND_IN)
            os.chmod(path, 0o755)
        os.chmod(cls.bin, 0o755)

    @classmethod
    def _ready(cls):
        if cls.proc.poll() is not None:
            raise AssertionError("tessera up exited: " + open(cls.log.name).read()[-2000:])
        try:
            with urllib.request.urlopen(cls.url + "/healthz", timeout=1) as answer:
                ok = answer.status == 200
        except OSError:
            return False
        return ok and os.path.exists(os.path.join(cls.data, "tokens", "team-a.token"))

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.send_signal(signal.SIGTERM)
            try:
                cls.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                cls.proc.kill()
                cls.proc.wait()
        cls.log.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def api(cls, path):
        req = urllib.request.Request(cls.url + path,
                                     headers={"Authorization": "Bearer " + cls.token})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def workdir(self, name):
        """A copy of the examples, writable by the tasks (they run as the tenant's uid)."""
        work = os.path.join(self.dir, name)
        shutil.copytree(EXAMPLES, work)
        os.mkdir(os.path.join(work, "records"))
        for d in (work, os.path.join(work, "records")):
            os.chmod(d, 0o777)
        return work

    def sbatch(self, work, *args, env=None):
        environment = dict(os.environ, PATH=self.bin + ":" + os.environ.get("PATH", ""),
                           TESSERA_SERVER=self.url, TESSERA_TOKEN=self.token, **(env or {}))
        out = subprocess.run(["tessera", "sbatch", "--parsable", *args], cwd=work,
                             env=environment, capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout.strip()

    def finished(self, job, timeout=30.0):
        return wait_for("job %s to end" % job, lambda: (
            lambda j: j if j["state"] in ("succeeded", "failed", "cancelled") else None)(
                self.api("/v1/jobs/" + str(job))), timeout)

    def records(self, work, tool, job=None):
        out = []
        pattern = "%s-%s-*.json" % (tool, job if job is not None else "*")
        for path in sorted(glob.glob(os.path.join(work, "records", pattern))):
            with open(path) as f:
                out.append(json.load(f))
        return out

    def test_data_parallel_training_sees_its_slurm_variables(self):
        work = self.workdir("ddp")
        job = self.sbatch(work, "train-ddp.sbatch")
        final = self.finished(job)
        self.assertEqual(final["state"], "succeeded", final)
        runs = self.records(work, "torchrun", job)
        self.assertEqual(len(runs), 2, runs)  # --nodes=2 --ntasks-per-node=1: two tasks
        for rank, run in enumerate(sorted(runs, key=lambda r: int(r["env"]["SLURM_PROCID"]))):
            env = run["env"]
            self.assertEqual(env["SLURM_PROCID"], str(rank))
            self.assertEqual(env["SLURM_JOB_ID"], job)
            self.assertEqual(env["SLURM_JOB_NAME"], "train-ddp")
            self.assertEqual(env["SLURM_NTASKS"], "2")
            self.assertEqual(env["SLURM_CPUS_PER_TASK"], "16")
            self.assertEqual(env["SLURM_SUBMIT_DIR"], work)
            self.assertEqual(env["SLURM_JOB_NODELIST"], final["tasks"][rank]["node"])
            self.assertEqual(env["MASTER_PORT"], str(20000 + int(job) % 20000))
            # One machine: both tasks share it, with 4 GPUs each.
            self.assertEqual(env["SLURM_GPUS_ON_NODE"], "8")
            self.assertEqual(env["SLURM_LOCALID"], str(rank))
            self.assertIn("--nnodes=1 --nproc_per_node=8 --rdzv_id=%s" % job, run["args"])
            self.assertIn("--rdzv_endpoint=%s:%s" % (env["MASTER_ADDR"], env["MASTER_PORT"]),
                          run["args"])
            self.assertEqual(run["cwd"], work)
        # Slurm's output file, named by the script's --output=%x-%j.out.
        with open(os.path.join(work, "train-ddp-%s.out" % job)) as f:
            text = f.read()
        self.assertIn("job %s: 1 nodes" % job, text)
        self.assertIn("torchrun ran: --nnodes=1", text)

    def test_an_array_sweep_runs_each_index_at_most_four_at_once(self):
        work = self.workdir("sweep")
        array = self.sbatch(work, "sweep-array.sbatch")
        ids = [int(array) + k for k in range(10)]
        for job in ids:
            self.assertEqual(self.finished(job)["state"], "succeeded")
        runs = self.records(work, "python")
        self.assertEqual(len(runs), 10, runs)
        lrs = ["0.1", "0.05", "0.02", "0.01", "0.005", "0.002", "0.001", "0.0005", "0.0002",
               "0.0001"]
        for run in runs:
            env = run["env"]
            self.assertEqual(env["SLURM_ARRAY_JOB_ID"], array)
            index = int(env["SLURM_ARRAY_TASK_ID"])
            self.assertEqual(env["SLURM_JOB_ID"], str(int(array) + index))
            self.assertEqual(env["SLURM_ARRAY_TASK_COUNT"], "10")
            self.assertIn("--lr %s --epochs 1 --run-name lr-%d" % (lrs[index], index), run["args"])
            with open(os.path.join(work, "sweep-%s_%d.out" % (array, index))) as f:
                self.assertIn("element %d: lr=%s" % (index, lrs[index]), f.read())
        self.assertEqual(sorted(int(r["env"]["SLURM_ARRAY_TASK_ID"]) for r in runs),
                         list(range(10)))
        # %4: never more than four elements at once (each runs 0.3 s).
        events = sorted([(r["start"], 1) for r in runs] + [(r["end"], -1) for r in runs])
        running = peak = 0
        for _, step in events:
            running += step
            peak = max(peak, running)
        self.assertLessEqual(peak, 4)
        self.assertGreaterEqual(peak, 2)

    def run_pipeline(self, work, env=None):
        environment = dict(os.environ, PATH=self.bin + ":" + os.environ.get("PATH", ""),
                           TESSERA_SERVER=self.url, TESSERA_TOKEN=self.token, **(env or {}))
        out = subprocess.run(["./pipeline.sh", "data"], cwd=work, env=environment,
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.split("\n")
        return lines[0].split()[-1], lines[1].split()[2]

    def test_a_pipeline_step_runs_after_the_one_it_depends_on_succeeds(self):
        work = self.workdir("pipeline")
        first, second = self.run_pipeline(work)
        self.assertEqual(self.finished(first)["state"], "succeeded")
        final = self.finished(second)
        self.assertEqual(final["state"], "succeeded", final)
        pre = self.records(work, "python", first)
        train = self.records(work, "python", second)
        self.assertEqual(len(pre), 1)
        self.assertEqual(len(train), 1)
        self.assertGreaterEqual(train[0]["start"], pre[0]["end"])
        self.assertIn("--data data/shards", train[0]["args"])
        self.assertTrue(os.path.exists(os.path.join(work, "data", "READY")))

    def test_afterok_on_a_failed_step_never_runs_and_says_why(self):
        work = self.workdir("pipeline-fails")
        first, second = self.run_pipeline(work, env={"FAIL_PREPROCESS": "1"})
        self.assertEqual(self.finished(first)["state"], "failed")
        reason = wait_for("the dependent's reason", lambda: (
            lambda j: j["reason"] if "never satisfied" in j["reason"] else None)(
                self.api("/v1/jobs/" + second)))
        self.assertIn("afterok on job %s, which failed" % first, reason)
        time.sleep(1)  # cycles go on: it still does not start
        job = self.api("/v1/jobs/" + second)
        self.assertEqual((job["state"], job["attempts"]), ("pending", 0))
        self.assertEqual(self.records(work, "python", second), [])


if __name__ == "__main__":
    unittest.main()
