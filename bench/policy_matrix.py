#!/usr/bin/env python3
"""Job policies judged on a matrix of cases: traces x clusters x loads x checkpoint
models x seeds, each cell one `tessera sim jobs --json` run of every policy.

For each cell it prints every policy's average JCT, its rank among the real policies
(the `srtf` oracle is shown but not ranked) and its gap to the best of them, with the
jobs left unfinished and Jain's index; then, per policy, the cells where it is within
2 % of the best, the worst gap and the lowest Jain. Every policy of a cell runs with
the same checkpoint model. Writes matrix.json and heatmap.svg (gap to the best per cell
and policy) to --out.

Usage: bench/policy_matrix.py [--tessera build/tessera]
         [--trace philly:PATH]... [--trace synthetic:jobs=2000,seed={seed}]...
         [--cluster philly-vc] [--cluster 16x4xH100-80GB]...
         [--loads 0.5,0.8,1.0] [--checkpoint periodic,signal] [--seeds 1,2,3]
         [--policies fifo,slurm,tiresias,srtf,tessera] [--limit N] [--out out/matrix]
A trace with "{seed}" in it is generated anew for each seed; every run also gets the
seed as `--seed` (tie-breaks, users' runtime limits). Standard library only.
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import time

ORACLES = {"srtf"}  # knows every job's runtime: shown, not ranked


def run_cell(args, trace, cluster, load, checkpoint, seed):
    cmd = [args.tessera, "sim", "jobs", "--trace", trace.replace("{seed}", str(seed)),
           "--cluster", cluster, "--policy", args.policies, "--load", str(load),
           "--seed", str(seed), "--json", "-q", "-j", str(args.threads),
           "--out", os.path.join(args.out, "runs")]
    if checkpoint == "signal":
        cmd.append("--checkpoint-on-signal")
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(" ".join(cmd) + ": " + out.stderr.strip())
    return json.loads(out.stdout)["summary"]


def trace_label(trace):
    """philly:PATH -> philly:FILE; synthetic:PARAMS without its seed."""
    kind, _, rest = trace.partition(":")
    if kind == "synthetic":
        params = [p for p in rest.split(",") if p and not p.startswith("seed=")]
        return "synthetic" + (":" + ",".join(params) if params else "")
    return kind + ":" + os.path.basename(rest) if rest else kind


def rank(rows):
    """Adds rank and gap (to the best real policy's average JCT) to each row."""
    real = [r for r in rows if r["policy"] not in ORACLES and r["jobs"] > 0]
    best = min((r["avg_jct_s"] for r in real), default=0)
    ordered = sorted(real, key=lambda r: r["avg_jct_s"])
    for r in rows:
        r["rank"] = ordered.index(r) + 1 if r in ordered else None
        r["gap"] = (r["avg_jct_s"] / best - 1) if best > 0 and r["jobs"] > 0 else None
    return rows


def heatmap(cells, policies, path):
    """One row per cell, one column per policy, coloured by the gap to the best."""
    cw, ch, top = 90, 18, 40
    left = 16 + 7 * max((len(c["label"]) for c in cells), default=0)  # about 7 px a character
    width, height = left + cw * len(policies) + 10, top + ch * len(cells) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="4" y="16">gap of each policy\'s average JCT to the best real policy '
             f'(green 0 %, red 20 % or more; grey: oracle or no finished job)</text>']
    for i, p in enumerate(policies):
        parts.append(f'<text x="{left + i * cw + 4}" y="{top - 6}">{p}</text>')
    for j, cell in enumerate(cells):
        y = top + j * ch
        parts.append(f'<text x="4" y="{y + 13}">{cell["label"]}</text>')
        by_policy = {r["policy"]: r for r in cell["rows"]}
        for i, p in enumerate(policies):
            r = by_policy.get(p)
            gap = None if r is None or p in ORACLES else r["gap"]
            if gap is None:
                colour, text = "#dddddd", "-" if r is None else f'{r["avg_jct_s"] / 3600:.2f}h'
            else:
                f = min(max(gap / 0.2, 0.0), 1.0)
                colour = f"rgb({int(60 + 195 * f)},{int(200 - 140 * f)},90)"
                text = f"{gap * 100:+.1f}%"
            parts.append(f'<rect x="{left + i * cw}" y="{y}" width="{cw - 2}" height="{ch - 2}" '
                         f'fill="{colour}"/><text x="{left + i * cw + 4}" y="{y + 13}">{text}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tessera", default="build/tessera")
    p.add_argument("--trace", action="append", dest="traces")
    p.add_argument("--cluster", action="append", dest="clusters")
    p.add_argument("--loads", default="0.5,0.8,1.0")
    p.add_argument("--checkpoint", default="periodic,signal")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--policies", default="fifo,slurm,tiresias,srtf,tessera")
    p.add_argument("--limit", type=int, default=0, help="replay only the first N jobs")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--out", default="out/matrix")
    args = p.parse_args()
    traces = args.traces or ["synthetic:jobs=2000,seed={seed}"]
    clusters = args.clusters or ["16x4xH100-80GB"]
    try:
        loads = [float(x) for x in args.loads.split(",")]
        seeds = [int(x) for x in args.seeds.split(",")]
    except ValueError:
        p.error("--loads takes numbers and --seeds whole numbers, comma-separated")
    checkpoints = args.checkpoint.split(",")
    if any(c not in ("periodic", "signal") for c in checkpoints):
        p.error("--checkpoint takes periodic and/or signal")
    if any(x <= 0 for x in loads):
        p.error("--loads must be positive")
    policies = args.policies.split(",")
    os.makedirs(args.out, exist_ok=True)

    started = time.time()
    cells = []
    combos = list(itertools.product(traces, clusters, loads, checkpoints, seeds))
    for n, (trace, cluster, load, checkpoint, seed) in enumerate(combos, 1):
        rows = rank(run_cell(args, trace, cluster, load, checkpoint, seed))
        label = f"{trace_label(trace)} {cluster} load {load} {checkpoint} seed {seed}"
        cells.append({"trace": trace, "cluster": cluster, "load": load,
                      "checkpoint": checkpoint, "seed": seed, "label": label, "rows": rows})
        print(f"[{n}/{len(combos)}] {label}: " + "  ".join(
            f"{r['policy']} {r['avg_jct_s'] / 3600:.2f}h"
            + (f" #{r['rank']} {r['gap'] * 100:+.1f}%" if r["rank"] else "")
            + (f" ({r['unfinished']} unfinished)" if r["unfinished"] else "")
            for r in rows), flush=True)

    print(f"\n{len(cells)} cells in {time.time() - started:.0f} s")
    print(f"{'policy':10s} {'within 2 %':>11s} {'worst gap':>10s} {'lowest jain':>12s}")
    for policy in policies:
        if policy in ORACLES:
            continue
        mine = [r for c in cells for r in c["rows"] if r["policy"] == policy and r["gap"] is not None]
        if not mine:
            continue
        within = sum(1 for r in mine if r["gap"] <= 0.02)
        print(f"{policy:10s} {within:>5d} / {len(mine):<4d} {max(r['gap'] for r in mine) * 100:>9.1f}%"
              f" {min(r['jain'] for r in mine):>12.3f}")
    with open(os.path.join(args.out, "matrix.json"), "w") as f:
        json.dump({"cells": cells, "seconds": round(time.time() - started, 1)}, f, indent=1)
    heatmap(cells, policies, os.path.join(args.out, "heatmap.svg"))
    print(f"results in {args.out}/ (matrix.json, heatmap.svg)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print("policy_matrix: " + str(e), file=sys.stderr)
        sys.exit(1)
