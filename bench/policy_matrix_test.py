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


def write_jobs(directory, policy, jobs):
    """jobs: (name, tenant, submit, finish or None)."""
    with open(os.path.join(directory, f"jobs_{policy}.csv"), "w") as f:
        f.write("name,tenant,gpus,submit_s,first_start_s,finish_s,runtime_s,service_s,"
                "preemptions,lost_gpu_seconds,predicted_s\n")
        for name, tenant, submit, finish in jobs:
            f.write(f"{name},{tenant},1,{submit},{submit},{'' if finish is None else finish},"
                    "10,10,0,0,\n")


def row(policy, avg_jct_s, jain=1.0, unfinished=0):
    return {"policy": policy, "avg_jct_s": avg_jct_s, "jobs": 2, "jain": jain,
            "unfinished": unfinished, "preemptions": 0}


class FairnessTest(unittest.TestCase):
    def test_rho_against_the_tenant_alone_on_its_quota(self):
        with tempfile.TemporaryDirectory() as d:
            # Alone: a's jobs take 100 and 300 s; b has no quota (never ran alone).
            write_jobs(d, "static-vc", [("j1", "a", 0, 100), ("j2", "a", 0, 300),
                                        ("j3", "b", 0, None)])
            # Shared: j1 takes 50 (rho 0.5), j2 450 (rho 1.5): a's rho 500/400 = 1.25.
            write_jobs(d, "good", [("j1", "a", 0, 50), ("j2", "a", 0, 450), ("j3", "b", 0, 9)])
            # A job the policy never finished is infinitely late.
            write_jobs(d, "bad", [("j1", "a", 0, 50), ("j2", "a", 0, None), ("j3", "b", 0, 9)])
            write_jobs(d, "fair", [("j1", "a", 0, 100), ("j2", "a", 0, 250), ("j3", "b", 0, 9)])
            rows = [row("static-vc", 200), row("good", 250), row("bad", 50), row("fair", 175)]
            policy_matrix.fairness(rows, d)
            by = {r["policy"]: r for r in rows}
            self.assertIsNone(by["static-vc"]["rho_max"])
            self.assertAlmostEqual(by["good"]["rho_max"], 1.25)
            self.assertAlmostEqual(by["good"]["rho_over_1"], 0.5)
            self.assertFalse(by["good"]["sharing_incentive"])
            self.assertEqual(by["bad"]["rho_max"], float("inf"))
            self.assertFalse(by["bad"]["sharing_incentive"])
            self.assertAlmostEqual(by["fair"]["rho_max"], 350 / 400)
            self.assertEqual(by["fair"]["rho_over_1"], 0)
            self.assertTrue(by["fair"]["sharing_incentive"])

    def test_no_reference_no_fairness(self):
        with tempfile.TemporaryDirectory() as d:
            rows = [row("fifo", 10)]
            policy_matrix.fairness(rows, d)
            self.assertNotIn("rho_max", rows[0])


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


if __name__ == "__main__":
    if len(sys.argv) > 1:
        TESSERA = sys.argv.pop(1)
    unittest.main(verbosity=2)
