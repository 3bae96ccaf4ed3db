"""The client against a fake controller: errors, redirects, failover, idempotency,
request bodies, listing, waiting, logs and where settings come from."""

import contextlib
import datetime
import io
import json
import os
import tempfile
import time
import unittest
from unittest import mock

from tessera_client import Client, Job, TesseraError
from tessera_client import _config
from tessera_client.client import _yaml_with_field

from .fake_controller import DROP, HANG, FakeController, dead_url, error_answer, json_answer


class ClientTestCase(unittest.TestCase):
    """Runs every test with no TESSERA_* variables and an empty home directory."""

    def setUp(self):
        self.home = tempfile.TemporaryDirectory()
        self.addCleanup(self.home.cleanup)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERA_")}
        env["HOME"] = self.home.name
        patcher = mock.patch.dict(os.environ, env, clear=True)
        patcher.start()
        self.addCleanup(patcher.stop)

    def fake(self, respond=None):
        fake = FakeController(respond)
        self.addCleanup(fake.close)
        return fake


class FakeTime:
    """Stands in for the transport's `time` module: a sleep moves the clock on at once."""

    def __init__(self):
        self.now = 1000.0
        self.slept = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def job_answer(request, job_id=7, state="pending", status=201):
    return json_answer(status, {"id": job_id, "name": "j", "state": state})


class ErrorTests(ClientTestCase):
    def test_the_apis_error_body_gives_code_and_message(self):
        fake = self.fake(lambda r: error_answer(400, "InvalidArgument",
                                                "resources.gpus: must be between 0 and 64, got 65"))
        with self.assertRaises(TesseraError) as caught:
            Client(server=fake.url, token="t").submit({"command": "true"})
        e = caught.exception
        self.assertEqual(e.status, 400)
        self.assertEqual(e.code, "InvalidArgument")
        self.assertEqual(e.message, "resources.gpus: must be between 0 and 64, got 65")
        self.assertIn("HTTP 400", str(e))

    def test_a_body_not_the_apis_gets_the_code_of_its_status(self):
        page = b"<html>bad gateway</html>"
        fake = self.fake(lambda r: (502, {"Content-Type": "text/html"}, page))
        with self.assertRaises(TesseraError) as caught:
            Client(server=fake.url).nodes()
        self.assertEqual(caught.exception.status, 502)
        self.assertEqual(caught.exception.code, "Unavailable")
        self.assertEqual(caught.exception.message, "HTTP 502: <html>bad gateway</html>")

    def test_not_found_and_conflict(self):
        fake = self.fake(lambda r: error_answer(404, "NotFound", "no job 99")
                         if r.method == "GET" else
                         error_answer(409, "FailedPrecondition", "job 3 has already succeeded"))
        client = Client(server=fake.url, token="t")
        with self.assertRaises(TesseraError) as caught:
            client.get(99)
        self.assertEqual((caught.exception.status, caught.exception.code), (404, "NotFound"))
        with self.assertRaises(TesseraError) as caught:
            client.cancel(3)
        self.assertEqual(caught.exception.code, "FailedPrecondition")

    def test_401_without_a_token_says_none_was_given(self):
        fake = self.fake(lambda r: error_answer(401, "Unauthenticated", "missing bearer token"))
        with self.assertRaises(TesseraError) as caught:
            Client(server=fake.url).jobs()
        self.assertIn("no token was given", caught.exception.message)
        self.assertNotIn("authorization", fake.requests[0].headers)

    def test_one_unreachable_address_is_reported_at_once(self):
        url = dead_url()
        start = time.monotonic()
        with self.assertRaises(TesseraError) as caught:
            Client(server=url).jobs()
        self.assertLess(time.monotonic() - start, 1.0)
        self.assertIsNone(caught.exception.status)
        self.assertEqual(caught.exception.code, "Unavailable")
        self.assertIn("cannot reach the controller at " + url, caught.exception.message)


class FailoverTests(ClientTestCase):
    def test_a_followers_redirect_is_followed_and_the_leader_kept(self):
        leader = self.fake(job_answer)
        follower = self.fake(lambda r: (307, {"Location": leader.url + r.path,
                                              "X-Tessera-Leader": leader.url}, b""))
        client = Client(server=follower.url, token="t")
        job = client.submit({"command": "true"})
        self.assertEqual(job.id, 7)
        self.assertEqual(client.server, leader.url)
        sent = leader.seen("POST", "/v1/jobs")
        self.assertEqual(len(sent), 1)
        self.assertEqual(sent[0].headers["idempotency-key"],
                         follower.seen("POST")[0].headers["idempotency-key"])
        self.assertEqual(sent[0].headers["authorization"], "Bearer t")
        client.get(7)  # straight to the leader now
        self.assertEqual(len(follower.requests), 1)
        self.assertEqual(len(leader.seen("GET", "/v1/jobs/7")), 1)

    def test_a_refused_address_moves_on_to_the_next(self):
        live = self.fake(lambda r: json_answer(200, {"nodes": [{"name": "a"}]}))
        client = Client(server=dead_url() + "," + live.url)
        self.assertEqual(client.nodes(), [{"name": "a"}])
        self.assertEqual(client.server, live.url)

    def test_no_leader_503_moves_on_to_the_next(self):
        waiting = self.fake(lambda r: error_answer(503, "Unavailable", "no leader: an election"))
        live = self.fake(job_answer)
        client = Client(server=waiting.url + "," + live.url)
        self.assertEqual(client.get(7).id, 7)
        self.assertEqual(len(waiting.requests), 1)

    def test_a_leaders_own_503_to_a_post_without_key_is_not_resent(self):
        leader = self.fake(lambda r: error_answer(503, "Unavailable", "could not make it durable"))
        other = self.fake(job_answer)
        with self.assertRaises(TesseraError) as caught:
            Client(server=leader.url + "," + other.url).cancel(7)
        self.assertEqual((caught.exception.status, caught.exception.code), (503, "Unavailable"))
        self.assertEqual(other.requests, [])

    def test_a_lost_answer_to_submit_is_resent_with_the_same_key(self):
        lost = self.fake(lambda r: DROP)
        live = self.fake(job_answer)
        job = Client(server=lost.url + "," + live.url).submit({"command": "true"})
        self.assertEqual(job.id, 7)
        first, second = lost.requests[0], live.requests[0]
        self.assertTrue(first.headers["idempotency-key"].startswith("py-"))
        self.assertEqual(first.headers["idempotency-key"], second.headers["idempotency-key"])
        self.assertEqual(first.body, second.body)

    def test_a_lost_answer_to_cancel_is_not_resent(self):
        lost = self.fake(lambda r: DROP)
        other = self.fake(job_answer)
        with self.assertRaises(TesseraError) as caught:
            Client(server=lost.url + "," + other.url).cancel(7)
        self.assertIn("it may have been carried out", caught.exception.message)
        self.assertEqual(other.requests, [])

    def test_a_hung_controller_times_out_and_the_next_answers(self):
        hung = self.fake(lambda r: HANG)
        live = self.fake(lambda r: json_answer(200, {"queues": []}))
        start = time.monotonic()
        self.assertEqual(Client(server=hung.url + "," + live.url, timeout=0.3).queues(), [])
        self.assertLess(time.monotonic() - start, 2.0)

    def fake_time(self):
        """The transport's clock and sleep, faked for the rest of the test."""
        fake = FakeTime()
        patcher = mock.patch("tessera_client._transport.time", fake)
        patcher.start()
        self.addCleanup(patcher.stop)
        return fake

    def test_when_every_address_fails_the_error_names_each(self):
        a, b = dead_url(), dead_url()
        self.fake_time()
        with self.assertRaises(TesseraError) as caught, \
                contextlib.redirect_stderr(io.StringIO()):
            Client(server=a + "," + b).jobs()
        message = caught.exception.message
        self.assertTrue(message.startswith("no controller answered: " + a + ": "), message)
        self.assertIn("; " + b + ": ", message)
        self.assertEqual(caught.exception.code, "Unavailable")

    def test_a_follower_naming_a_dead_leader_is_asked_again_until_it_leads(self):
        # The leader died; the survivor redirects to it until its lease ends, then leads.
        dead = dead_url()
        redirects = [3]

        def survivor_answer(request):
            if redirects[0] > 0:
                redirects[0] -= 1
                return 307, {"Location": dead + request.path, "X-Tessera-Leader": dead}, b""
            return job_answer(request)
        survivor = self.fake(survivor_answer)
        clock = self.fake_time()
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            job = Client(server=dead + "," + survivor.url).submit({"command": "true"})
        self.assertEqual(job.id, 7)
        posts = survivor.seen("POST", "/v1/jobs")
        self.assertEqual(len(posts), 4)  # 3 redirects, then the one that made the job
        keys = {r.headers["idempotency-key"] for r in posts}
        self.assertEqual(len(keys), 1, keys)
        self.assertTrue(keys.pop().startswith("py-"))
        self.assertLess(clock.now - 1000.0, 60.0)
        self.assertEqual(err.getvalue().count("\n"), 1, err.getvalue())
        self.assertIn("controller at %s not answering" % dead, err.getvalue())
        self.assertIn("retrying for up to 60 s", err.getvalue())

    def test_nobody_answering_is_retried_until_the_bound_then_reported(self):
        dead = dead_url()
        waiting = self.fake(lambda r: error_answer(503, "Unavailable", "no leader: an election"))
        clock = self.fake_time()
        with self.assertRaises(TesseraError) as caught, \
                contextlib.redirect_stderr(io.StringIO()):
            Client(server=dead + "," + waiting.url).submit({"command": "true"})
        self.assertGreaterEqual(clock.now - 1000.0, 60.0)
        self.assertLess(clock.now - 1000.0, 62.0)
        self.assertGreater(len(waiting.requests), 10)
        self.assertEqual(len({r.headers["idempotency-key"] for r in waiting.requests}), 1)
        self.assertEqual(caught.exception.code, "Unavailable")
        message = caught.exception.message
        self.assertTrue(message.startswith("no controller answered: %s: " % dead), message)
        self.assertTrue(message.endswith("; %s: no leader: an election" % waiting.url), message)

    def test_tessera_failover_timeout_sets_the_bound(self):
        dead = dead_url()
        waiting = self.fake(lambda r: error_answer(503, "Unavailable", "no leader: an election"))
        clock = self.fake_time()
        os.environ["TESSERA_FAILOVER_TIMEOUT"] = "5"
        err = io.StringIO()
        with self.assertRaises(TesseraError), contextlib.redirect_stderr(err):
            Client(server=dead + "," + waiting.url).nodes()
        self.assertGreaterEqual(clock.now - 1000.0, 5.0)
        self.assertLess(clock.now - 1000.0, 7.0)
        self.assertIn("retrying for up to 5 s", err.getvalue())
        os.environ["TESSERA_FAILOVER_TIMEOUT"] = "soon"
        with self.assertRaises(ValueError):
            Client(server=dead + "," + waiting.url)


class SubmitTests(ClientTestCase):
    def setUp(self):
        super().setUp()
        self.server = self.fake(job_answer)
        self.client = Client(server=self.server.url, token="t")

    def sent(self):
        return self.server.requests[-1]

    def test_a_dict_is_sent_as_json_with_the_submit_dir(self):
        self.client.submit({"name": "a", "command": ["python", "train.py"]})
        self.assertEqual(self.sent().headers["content-type"], "application/json")
        self.assertEqual(self.sent().json(), {"name": "a", "command": ["python", "train.py"],
                                              "submit_dir": os.getcwd()})
        self.client.submit({"command": "true", "submit_dir": "/data"}, submit_dir="/x")
        self.assertEqual(self.sent().json()["submit_dir"], "/data")

    def test_yaml_text_is_sent_as_written(self):
        text = "name: y\ncommand: |\n  echo hi\n"
        self.client.submit(text, submit_dir="")
        self.assertEqual(self.sent().headers["content-type"], "application/yaml")
        self.assertEqual(self.sent().body.decode(), text)
        self.client.submit(text, submit_dir="/work/x")
        self.assertEqual(self.sent().body.decode(), text + 'submit_dir: "/work/x"\n')

    def test_a_job_file_path_is_read(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "job.yaml")
            with open(path, "w") as f:
                f.write("command: echo from file\n")
            self.client.submit(path, submit_dir="")
            self.assertEqual(self.sent().body, b"command: echo from file\n")
            path = os.path.join(d, "job.json")
            with open(path, "w") as f:
                f.write('{"command": "true"}')
            self.client.submit(path, submit_dir="/s")
            self.assertEqual(self.sent().json(), {"command": "true", "submit_dir": "/s"})
        with self.assertRaises(FileNotFoundError):
            self.client.submit("missing.yaml")

    def test_every_submission_has_its_own_key_unless_one_is_given(self):
        self.client.submit({"command": "true"})
        self.client.submit({"command": "true"})
        keys = [r.headers["idempotency-key"] for r in self.server.requests]
        self.assertNotEqual(keys[0], keys[1])
        self.client.submit({"command": "true"}, idempotency_key="cell-3")
        self.assertEqual(self.sent().headers["idempotency-key"], "cell-3")

    def test_a_batch_of_dicts_is_one_request(self):
        self.server.respond = lambda r: json_answer(201, {"ids": [4, 5]})
        ids = self.client.submit_batch([{"command": "true"}, {"command": "false"}],
                                       submit_dir="/d")
        self.assertEqual(ids, [4, 5])
        self.assertEqual(self.sent().path, "/v1/jobs/batch")
        self.assertTrue(self.sent().headers["idempotency-key"].startswith("py-"))
        self.assertEqual(self.sent().json(), {"jobs": [{"command": "true"}, {"command": "false"}],
                                              "submit_dir": "/d"})
        with self.assertRaises(TypeError):
            self.client.submit_batch(["command: true"])

    def test_yaml_fields_are_added_only_where_safe(self):
        self.assertEqual(_yaml_with_field("a: 1", "k", "v"), 'a: 1\nk: "v"\n')
        for text in ("{a: 1}", "- a\n", "---\na: 1\n", "a: 1\nk: old\n", "# only a comment\n"):
            self.assertEqual(_yaml_with_field(text, "k", "v"), text)


class ReadTests(ClientTestCase):
    def test_jobs_follows_pages_with_the_default_states(self):
        def respond(r):
            if "after=5" in r.path:
                return json_answer(200, {"jobs": [{"id": 4}], "next": None})
            return json_answer(200, {"jobs": [{"id": 6}, {"id": 5}], "next": "5"})
        fake = self.fake(respond)
        jobs = Client(server=fake.url).jobs(queue="team-a")
        self.assertEqual([j.id for j in jobs], [6, 5, 4])
        self.assertIsInstance(jobs[0], Job)
        first = fake.requests[0].path
        self.assertIn("state=pending%2Crunning%2Cstopping", first)
        self.assertIn("queue=team-a", first)
        self.assertIn("after=5", fake.requests[1].path)

    def test_jobs_all_limit_and_states(self):
        fake = self.fake(lambda r: json_answer(200, {"jobs": [{"id": 9}, {"id": 8}], "next": "8"}))
        client = Client(server=fake.url)
        self.assertEqual([j.id for j in client.jobs(all=True, limit=2)], [9, 8])
        self.assertEqual(len(fake.requests), 1)
        self.assertNotIn("state=", fake.requests[0].path)
        self.assertIn("limit=2", fake.requests[0].path)
        client.jobs(state=["failed", "cancelled"], limit=1)
        self.assertIn("state=failed%2Ccancelled", fake.requests[-1].path)

    def test_array_element_ids_pass_through(self):
        fake = self.fake(lambda r: json_answer(200, {"id": "12_3", "state": "running"}))
        client = Client(server=fake.url)
        self.assertEqual(client.get("12_3").id, "12_3")
        self.assertEqual(fake.requests[-1].path, "/v1/jobs/12_3")
        client.cancel(Job({"id": "12_3"}))
        self.assertEqual(fake.requests[-1].path, "/v1/jobs/12_3/cancel")
        with self.assertRaises(ValueError):
            client.get(0)
        with self.assertRaises(TypeError):
            client.get(None)

    def test_wait_returns_the_final_job_or_times_out(self):
        states = iter(["pending", "running", "failed"])
        fake = self.fake(lambda r: json_answer(200, {"id": 3, "state": next(states, "failed"),
                                                     "exit_code": 1}))
        job = Client(server=fake.url).wait(3, poll=0.01)
        self.assertEqual((job.state, job.exit_code, job.done, job.succeeded),
                         ("failed", 1, True, False))
        self.assertEqual(len(fake.requests), 3)
        fake.respond = lambda r: json_answer(200, {"id": 3, "state": "running"})
        with self.assertRaises(TimeoutError):
            Client(server=fake.url).wait(3, timeout=0.1, poll=0.02)

    def test_logs_reads_every_chunk_and_decodes_across_them(self):
        text = "héllo wörld\n".encode("utf-8")
        chunks = [text[:2], text[2:8], text[8:]]  # "é" split between the first two

        starts = [0, 2, 8]  # each chunk's offset

        def respond(r):
            offset = int(r.path.split("offset=")[1])
            i = starts.index(offset) if offset in starts else len(chunks)
            body = chunks[i] if i < len(chunks) else b""
            state = "running" if i < 2 else "succeeded"
            return 200, {"X-Log-Offset": str(offset + len(body)), "X-Job-State": state}, body
        fake = self.fake(respond)
        client = Client(server=fake.url)
        self.assertEqual(client.logs(5), "héllo wörld\n")
        self.assertIn("task=0", fake.requests[0].path)
        followed = list(client.logs(5, task=0, follow=True, poll=0.01))
        self.assertEqual("".join(followed), "héllo wörld\n")
        self.assertGreaterEqual(len(followed), 3)

    def test_logs_follow_waits_for_the_job_to_end(self):
        reads = []

        def respond(r):
            reads.append(r.path)
            if len(reads) == 1:
                return 200, {"X-Log-Offset": "3", "X-Job-State": "running"}, b"ab\n"
            state = "running" if len(reads) < 4 else "succeeded"
            return 200, {"X-Log-Offset": "3", "X-Job-State": state}, b""
        fake = self.fake(respond)
        self.assertEqual(list(Client(server=fake.url).logs(1, follow=True, poll=0.01)), ["ab\n"])
        self.assertEqual(len(reads), 4)

    def test_usage_sends_rfc3339_times(self):
        fake = self.fake(lambda r: json_answer(200, {"by": "queue", "rows": []}))
        client = Client(server=fake.url)
        self.assertEqual(client.usage(since="7d", by="queue"), {"by": "queue", "rows": []})
        path = fake.requests[-1].path
        week_ago = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=7)
        self.assertIn("since=" + week_ago.strftime("%Y-%m-%dT%H"), path)
        self.assertIn("by=queue", path)
        self.assertNotIn("until=", path)  # the controller's own now
        client.usage(since="2026-11-01", until=datetime.datetime(2026, 11, 2, 9, 0,
                                                                  tzinfo=datetime.timezone.utc))
        self.assertIn("since=2026-11-01&", fake.requests[-1].path)
        self.assertIn("&until=2026-11-02T09%3A00%3A00Z", fake.requests[-1].path)
        with self.assertRaises(ValueError):
            client.usage(since="last week")


class ConfigTests(ClientTestCase):
    def write_config(self, doc):
        directory = os.path.join(self.home.name, ".config", "tessera")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(doc, f)

    def test_the_config_file_gives_server_and_token(self):
        fake = self.fake(lambda r: json_answer(200, {"nodes": []}))
        self.write_config({"server": fake.url, "token": "from-login"})
        client = Client()
        self.assertEqual(client.nodes(), [])
        self.assertEqual(fake.requests[0].headers["authorization"], "Bearer from-login")
        self.assertNotIn("from-login", repr(client))

    def test_the_environment_wins_over_the_config_file(self):
        self.write_config({"server": "http://config:1", "token": "from-login"})
        env = {"HOME": self.home.name, "TESSERA_SERVER": "http://config:1",
               "TESSERA_TOKEN": " env-token\n"}
        server, token, _, _, _ = _config.resolve(env=env)
        self.assertEqual((server, token), ("http://config:1", "env-token"))
        # A token for the config's server is not sent to another one.
        env = {"HOME": self.home.name, "TESSERA_SERVER": "http://elsewhere:2"}
        server, token, _, _, _ = _config.resolve(env=env)
        self.assertEqual((server, token), ("http://elsewhere:2", ""))
        # Arguments win over both.
        server, token, _, _, _ = _config.resolve("http://arg:3", "arg-token", env=env)
        self.assertEqual((server, token), ("http://arg:3", "arg-token"))

    def test_xdg_config_home_names_the_config_file_as_for_the_cli(self):
        xdg = os.path.join(self.home.name, "xdg")
        os.makedirs(os.path.join(xdg, "tessera"))
        with open(os.path.join(xdg, "tessera", "config.json"), "w") as f:
            json.dump({"server": "http://xdg:4", "token": "xdg-token"}, f)
        self.write_config({"server": "http://home:5", "token": "home-token"})
        env = {"HOME": self.home.name, "XDG_CONFIG_HOME": xdg}
        server, token, _, _, _ = _config.resolve(env=env)
        self.assertEqual((server, token), ("http://xdg:4", "xdg-token"))
        env["XDG_CONFIG_HOME"] = "relative/dir"  # not absolute: ignored
        server, token, _, _, _ = _config.resolve(env=env)
        self.assertEqual((server, token), ("http://home:5", "home-token"))

    def test_token_file_and_defaults(self):
        path = os.path.join(self.home.name, "token")
        with open(path, "w") as f:
            f.write("  file-token\n")
        server, token, _, insecure, _ = _config.resolve(
            env={"HOME": self.home.name, "TESSERA_TOKEN_FILE": path, "TESSERA_INSECURE": "1"})
        self.assertEqual((server, token, insecure), ("http://127.0.0.1:7450", "file-token", True))
        open(path, "w").close()
        with self.assertRaises(ValueError):
            _config.resolve(env={"HOME": self.home.name, "TESSERA_TOKEN_FILE": path})
        with self.assertRaises(ValueError):
            _config.resolve(token="bad\ntoken", env={"HOME": self.home.name})

    def test_bad_server_urls_are_refused(self):
        for url in ("ftp://host", "http://host:99999", "http://", "http://h/?q=1"):
            with self.assertRaises(ValueError, msg=url):
                Client(server=url)


if __name__ == "__main__":
    unittest.main()
