"""The client against a real one-machine cluster: `tessera up` with fake GPUs on a free
loopback port, in a scratch directory. TESSERA_BIN names the binary (ctest passes the
build's); without it these tests fail, they are not skipped."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

from tessera_client import Client, Job, TesseraError

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, check, timeout=20.0):
    """Polls `check` every 50 ms until it returns something true; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


class Cluster:
    """`tessera up` in a scratch directory (mode 0711: tasks run as their tenant's uid)."""

    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="tessera-pyclient-")
        os.chmod(self.dir, 0o711)
        self.data = os.path.join(self.dir, "data")
        self.url = "http://127.0.0.1:%d" % free_port()
        self.log_path = os.path.join(self.dir, "up.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, "up", "--data", self.data, "--listen", self.url[len("http://"):],
             "--fake-gpus", "1x2xH100-80GB", "--stop-grace", "2s", "--no-fsync"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_for("tessera up to answer", self._ready)
            self.admin = self._token("admin.token")
            self.tenant = self._token(os.path.join("tokens", "team-a.token"))
            admin = Client(server=self.url, token=self.admin)
            wait_for("the agent to register", lambda: any(
                n.get("state") == "up" for n in admin.nodes()))
        except BaseException:
            self.stop()
            raise

    def _ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("tessera up exited with %s: %s" % (self.proc.returncode,
                                                                    self.log_tail()))
        try:
            with urllib.request.urlopen(self.url + "/healthz", timeout=1) as answer:
                ok = answer.status == 200
        except OSError:
            return False
        return ok and os.path.exists(os.path.join(self.data, "tokens", "team-a.token"))

    def _token(self, name):
        with open(os.path.join(self.data, name)) as f:
            return f.read().strip()

    def log_tail(self):
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()[-2000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        binary = os.environ.get("TESSERA_BIN", "")
        if not binary or not os.access(binary, os.X_OK):
            raise AssertionError("set TESSERA_BIN to the tessera binary (got %r)" % binary)
        cls.cluster = Cluster(binary)
        cls.client = Client(server=cls.cluster.url, token=cls.cluster.tenant, timeout=10)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def finished(self, job):
        final = self.client.wait(job, timeout=20, poll=0.05)
        self.assertTrue(final.done, final)
        return final

    def test_a_dict_job_runs_and_its_logs_are_read(self):
        job = self.client.submit({"name": "py-dict",
                                  "resources": {"cpu": "500m", "memory": "64MiB"},
                                  "command": ["/bin/sh", "-c", "echo hello from a dict; exit 3"]})
        self.assertIsInstance(job, Job)
        self.assertIsInstance(job.id, int)
        self.assertEqual((job.name, job.get("tenant")), ("py-dict", "team-a"))
        final = self.finished(job)
        self.assertEqual((final.state, final.exit_code), ("failed", 3), final)
        self.assertEqual(self.client.logs(job), "hello from a dict\n")
        self.assertEqual(final["spec"]["submit_dir"], os.getcwd())

    def test_yaml_text_and_a_job_file_run(self):
        job = self.client.submit("name: py-yaml\nenv: {GREETING: hi}\ncommand: |\n"
                                 "  echo \"$GREETING from yaml\"\n")
        final = self.finished(job)
        self.assertEqual((final.state, final.exit_code), ("succeeded", 0), final)
        self.assertEqual(self.client.logs(final), "hi from yaml\n")
        from_file = self.client.submit(os.path.join(EXAMPLES, "preprocess-cpu.yaml"))
        self.assertEqual(from_file.name, "preprocess-cpu")
        self.assertEqual(self.finished(from_file).state, "succeeded")
        self.assertIn("shard 3\ndone\n", self.client.logs(from_file))

    def test_logs_follow_a_running_job_to_its_end(self):
        job = self.client.submit({"command": "for i in 1 2 3; do echo line $i; sleep 0.2; done"})
        chunks = list(self.client.logs(job, follow=True, poll=0.05, timeout=20))
        self.assertEqual("".join(chunks), "line 1\nline 2\nline 3\n")
        self.assertEqual(self.client.get(job.id).state, "succeeded")

    def test_a_long_job_is_listed_and_cancelled(self):
        job = self.client.submit({"name": "py-long", "command": ["sleep", "300"]})
        wait_for("the job to run", lambda: self.client.get(job).state == "running")
        self.assertIn(job.id, [j.id for j in self.client.jobs()])
        self.assertIn(job.id, [j.id for j in self.client.jobs(state="running", queue="team-a")])
        cancelled = self.client.cancel(job)
        self.assertEqual(cancelled.id, job.id)
        final = self.client.wait(job, timeout=15, poll=0.05)
        self.assertEqual(final.state, "cancelled")
        self.assertNotIn(job.id, [j.id for j in self.client.jobs()])
        self.assertIn(job.id, [j.id for j in self.client.jobs(state="cancelled")])
        self.assertIn(job.id, [j.id for j in self.client.jobs(all=True)])
        with self.assertRaises(TesseraError) as caught:
            self.client.cancel(job)
        self.assertEqual((caught.exception.status, caught.exception.code),
                         (409, "FailedPrecondition"))

    def test_a_resent_submission_is_the_same_job(self):
        spec = {"name": "py-once", "command": "true"}
        first = self.client.submit(spec, idempotency_key="py-test-once")
        again = self.client.submit(spec, idempotency_key="py-test-once")
        self.assertEqual(first.id, again.id)
        with self.assertRaises(TesseraError) as caught:
            self.client.submit({"name": "py-other", "command": "true"},
                               idempotency_key="py-test-once")
        self.assertEqual((caught.exception.status, caught.exception.code), (422, "AlreadyExists"))

    def test_a_batch_runs_every_job(self):
        ids = self.client.submit_batch([{"name": "py-b%d" % i, "command": "echo %d" % i}
                                        for i in range(3)])
        self.assertEqual(len(ids), 3)
        for i, job_id in enumerate(ids):
            self.assertEqual(self.finished(job_id).state, "succeeded")
            self.assertEqual(self.client.logs(job_id), "%d\n" % i)

    def test_errors_carry_the_apis_code_and_message(self):
        with self.assertRaises(TesseraError) as caught:
            self.client.submit({"command": "true", "resources": {"gpus": 65}})
        self.assertEqual((caught.exception.status, caught.exception.code), (400, "InvalidArgument"))
        self.assertTrue(caught.exception.message.startswith("resources.gpus:"),
                        caught.exception.message)
        with self.assertRaises(TesseraError) as caught:
            self.client.get(999999)
        self.assertEqual((caught.exception.status, caught.exception.code), (404, "NotFound"))
        with self.assertRaises(TesseraError) as caught:
            Client(server=self.cluster.url, token="not-a-token").jobs()
        self.assertEqual((caught.exception.status, caught.exception.code), (401, "Unauthenticated"))

    def test_usage_nodes_and_queues(self):
        self.finished(self.client.submit({"name": "py-usage", "command": "true"}))
        usage = self.client.usage(since="1h")
        rows = {row["key"]: row for row in usage["rows"]}
        self.assertGreaterEqual(rows["team-a"]["jobs"], 1, usage)
        self.assertEqual(usage["by"], "tenant")
        nodes = self.client.nodes()
        self.assertEqual(len(nodes), 1)
        self.assertEqual(len(nodes[0]["gpus"]), 2)
        self.assertIn("team-a", [q["name"] for q in self.client.queues()])


if __name__ == "__main__":
    unittest.main()
