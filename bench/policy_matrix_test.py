#!/usr/bin/env python3
"""Tests of bench/policy_matrix.py: finish-time fairness, ranking and the goal checks on
hand-made runs, and (given a tessera binary) one small cell end to end.

Usage: policy_matrix_test.py [TESSERA]"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import policy_matrix  # noqa: E402

TESSERA = None


def row(policy, avg_jct_s, jain=1.0, unfinished=0):
    return {"policy": policy, "avg_jct_s": avg_jct_s, "jobs": 2, "jain": jain,
            "unfinished": unfinished, "preemptions": 0}


def tenant(name, rho, within, jobs=10, over=0):
    return {"tenant": name, "rho": rho, "within_quota": within, "jobs": jobs,
            "jobs_over_1": over}


class FairnessTest(unittest.TestCase):
    def test_from_the_simulators_rho(self):
        good, bad, none = row("good", 100), row("bad", 100), row("fifo", 100)
        good["tenant_rho"] = [tenant("t0", 0.8, False, over=2), tenant("t1", 1.05, True, over=3)]
        # rho null: a job never finished, infinitely late.
        bad["tenant_rho"] = [tenant("t0", 0.9, False), tenant("t1", None, True, over=10)]
        rows = [good, bad, none]
        policy_matrix.fairness(rows)
        self.assertAlmostEqual(good["rho_max"], 1.05)
        self.assertAlmostEqual(good["rho_within_max"], 1.05)
        self.assertAlmostEqual(good["rho_over_1"], 5 / 20)
        self.assertFalse(good["sharing_incentive"])
        self.assertEqual(bad["rho_max"], float("inf"))
        self.assertEqual(bad["rho_within_max"], float("inf"))
        self.assertIsNone(none["rho_max"])
        self.assertIsNone(none["sharing_incentive"])
        fair = row("fair", 100)
        fair["tenant_rho"] = [tenant("t0", 1.0, False)]
        policy_matrix.fairness([fair])
        self.assertTrue(fair["sharing_incentive"])
        self.assertIsNone(fair["rho_within_max"])


class JudgeTest(unittest.TestCase):
    def cell(self, checkpoint, rows):
        return {"trace": "t", "cluster": "c", "load": 1.0, "seed": 1, "checkpoint": checkpoint,
                "label": f"t c {checkpoint}", "rows": policy_matrix.rank(rows)}

    def test_rank_leaves_the_oracle_out(self):
        rows = policy_matrix.rank([row("fifo", 120), row("srtf", 50), row("tessera", 100)])
        by = {r["policy"]: r for r in rows}
        self.assertEqual(by["tessera"]["rank"], 1)
        self.assertEqual(by["fifo"]["rank"], 2)
        self.assertAlmostEqual(by["fifo"]["gap"], 0.2)
        self.assertIsNone(by["srtf"]["rank"])

    def test_every_goal_is_checked(self):
        periodic = self.cell("periodic", [row("fifo", 100), row("tessera", 101, jain=0.95)])
        # On signal: 3 % behind fifo, unfair, and worse than itself with periodic ones.
        signal = self.cell("signal", [row("fifo", 100), row("tessera", 103, jain=0.8,
                                                             unfinished=1)])
        signal["rows"][1]["sharing_incentive"] = False
        signal["rows"][1]["rho_max"] = 1.4
        misses = policy_matrix.judge([periodic, signal], "tessera")
        reasons = sorted(why.split(" ")[0] for label, why in misses)
        self.assertEqual(reasons, ["1", "Jain", "avg", "on-signal", "sharing"])
        self.assertTrue(all(label == "t c signal" for label, _ in misses))
        self.assertEqual(policy_matrix.judge([periodic], "tessera"), [])

    def test_rho_of_a_tenant_within_its_quota(self):
        ok = self.cell("periodic", [row("fifo", 100), row("tessera", 100)])
        ok["rows"][1]["tenant_rho"] = [tenant("t0", 3.0, False), tenant("t1", 1.1, True)]
        policy_matrix.fairness(ok["rows"])
        # Above 1 (sharing incentive) but the over-quota tenant's 3.0 is not a broken
        # promise, and 1.1 is within the goal.
        self.assertEqual([w for _, w in policy_matrix.judge([ok], "tessera")],
                         ["sharing incentive (max rho 3.00)"])
        ok["rows"][1]["tenant_rho"][1]["rho"] = 1.12
        policy_matrix.fairness(ok["rows"])
        misses = [w for _, w in policy_matrix.judge([ok], "tessera")]
        self.assertIn("rho 1.12 for a tenant within its quota (goal 1.1)", misses)


    def test_a_broken_invariant_is_a_missed_goal(self):
        c = self.cell("periodic", [row("fifo", 100), row("tessera", 100)])
        c["rows"][1]["quota_violations"] = 2
        self.assertEqual([w for _, w in policy_matrix.judge([c], "tessera")],
                         ["2 cycles broke the core's invariants (quotas, guarantees)"])


class CompareTest(unittest.TestCase):
    def run_json(self, d, name, jcts):
        cells = []
        for seed, (fifo, tessera) in enumerate(jcts):
            cells.append({"trace": "t", "cluster": "c", "load": 1.0, "checkpoint": "periodic",
                          "seed": seed, "args": [], "label": f"s{seed}",
                          "rows": policy_matrix.rank([row("fifo", fifo), row("tessera", tessera)])})
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump({"cells": cells}, f)
        return path

    def test_counts_cells_within_the_goal_in_each_run(self):
        import contextlib
        import io
        with tempfile.TemporaryDirectory() as d:
            old = self.run_json(d, "old.json", [(100, 110), (100, 101)])
            new = self.run_json(d, "new.json", [(100, 100), (100, 100), (100, 90)][:2])
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                policy_matrix.compare(old, new, ["fifo", "tessera"])
        lines = {l.split()[0]: l for l in out.getvalue().splitlines()[2:]}
        # tessera: 1 of 2 cells within 2 % before (+10 %, +1 %), 2 after; JCT 100/110.
        self.assertIn("1 -> 2", lines["tessera"])
        self.assertIn("10.0 ->   0.0%", lines["tessera"])
        self.assertIn("0.909..0.990", lines["tessera"])


class StampTest(unittest.TestCase):
    def fake_tessera(self, d, fingerprint):
        path = os.path.join(d, "tessera")
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\necho '{{\"fingerprint\": \"{fingerprint}\"}}'\n")
        os.chmod(path, 0o755)
        return path

    def committed(self, d, stamp):
        os.makedirs(os.path.join(d, "standard-x"))
        with open(os.path.join(d, "standard-x", "matrix.json"), "w") as f:
            json.dump({"cells": []} if stamp is None else
                      {"stamp": {"defaults": {"fingerprint": stamp}}, "cells": []}, f)
        latest = os.path.join(d, "latest-standard.txt")
        with open(latest, "w") as f:
            f.write("standard-x\n")
        return latest

    def test_fails_unless_the_fingerprints_match(self):
        for stamp, want in ((None, 1), ("aaaa", 1), ("bbbb", 0)):
            with tempfile.TemporaryDirectory() as d:
                latest = self.committed(d, stamp)
                self.assertEqual(policy_matrix.check_stamp(self.fake_tessera(d, "bbbb"), latest),
                                 want, stamp)

    def test_no_committed_matrix_fails_with_a_message(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(policy_matrix.check_stamp(self.fake_tessera(d, "bbbb"),
                                                       os.path.join(d, "missing.txt")), 1)

    def test_the_stamp_names_the_tree(self):
        stamp = policy_matrix.git_stamp()
        self.assertIn("dirty", stamp)
        if stamp["commit"] is not None:
            self.assertEqual(len(stamp["tree"]), 40)


class EndToEndTest(unittest.TestCase):
    def test_one_small_cell(self):
        self.assertIsNotNone(TESSERA, "give the tessera binary as the first argument")
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run(
                [sys.executable, os.path.join(os.path.dirname(__file__), "policy_matrix.py"),
                 "--tessera", TESSERA, "--trace", "synthetic:jobs=150,seed={seed},tenants=2",
                 "--cluster", "4x4xH100-80GB", "--loads", "1.2", "--seeds", "1",
                 "--checkpoint", "periodic,signal", "--policies", "fifo,tiresias,tessera",
                 "--threads", "1", "--out", d], capture_output=True, text=True, timeout=300)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("2 cells in", out.stdout)
            with open(os.path.join(d, "matrix.json")) as f:
                data = json.load(f)
            self.assertEqual(len(data["cells"]), 2)
            for cell in data["cells"]:
                ranks = sorted(r["rank"] for r in cell["rows"])
                self.assertEqual(ranks, [1, 2, 3])
                best = min(r["avg_jct_s"] for r in cell["rows"])
                self.assertGreater(best, 0)
            self.assertTrue(os.path.exists(os.path.join(d, "heatmap.svg")))
            with open(os.path.join(d, "table.md")) as f:
                self.assertIn("| tessera |", f.read())
            self.assertEqual(len(data["stamp"]["defaults"]["fingerprint"]), 16)

    def test_two_tenants_with_quotas_report_rho(self):
        self.assertIsNotNone(TESSERA, "give the tessera binary as the first argument")
        with tempfile.TemporaryDirectory() as d:
            out = subprocess.run(
                [sys.executable, os.path.join(os.path.dirname(__file__), "policy_matrix.py"),
                 "--tessera", TESSERA, "--trace",
                 "synthetic:jobs=150,seed={seed},tenant_weights=10/1", "--cluster",
                 "8x8xH100-80GB", "--queues", policy_matrix.TWO_TENANTS_QUEUES, "--loads", "2.2",
                 "--seeds", "1", "--checkpoint", "lossy", "--policies", "fifo,tessera",
                 "--threads", "1", "--out", d], capture_output=True, text=True, timeout=300)
            self.assertEqual(out.returncode, 0, out.stderr)
            with open(os.path.join(d, "matrix.json")) as f:
                cell = json.load(f)["cells"][0]
            self.assertEqual(cell["checkpoint"], "lossy")
            for r in cell["rows"]:
                self.assertEqual([t["tenant"] for t in r["tenant_rho"]], ["t0", "t1"])
                self.assertIsNotNone(r["rho_max"])
                # t1 asks for a tenth of 2.2 x 64 GPUs: within its 32.
                self.assertTrue(r["tenant_rho"][1]["within_quota"])
                self.assertFalse(r["tenant_rho"][0]["within_quota"])


if __name__ == "__main__":
    if len(sys.argv) > 1:
        TESSERA = sys.argv.pop(1)
    unittest.main(verbosity=2)
