#!/usr/bin/env python3
"""Job policies judged on a matrix of cases: traces x clusters x loads x checkpoint
models x seeds, each cell one `tessera sim jobs --json --per-job` run of every policy.

Every policy of a cell runs under the same preemption model: the cell's checkpoint
model (`periodic` at the job's interval, `signal`: also on preemption, `lossy`:
periodic with no checkpoint wait, so that a victim loses its work since the last
one), the same checkpoint wait and the same restart overhead per preemption (sim
jobs' defaults unless --restart-overhead is given). For each cell it prints every
policy's average JCT, its rank among the real policies (the `srtf` oracle is shown but
not ranked) and its gap to the best of them, with the jobs left unfinished. Where the
cluster has quotas, it also reports the simulator's finish-time fairness: per tenant
with a quota rho = average JCT under the policy / average JCT alone on its quota under
the same policy, the largest rho, the largest rho of a tenant whose demand is within
its quota, the share of jobs slower than alone, and whether the sharing incentive
holds (no such tenant worse on average than alone).

Then it checks the goals of --judge (default `tessera`) in every cell: average JCT
within 2 % of the best real policy, Jain >= 0.9, the sharing incentive, rho <= 1.1 for
every tenant within its quota, and no cell where on-signal checkpoints make it worse
than periodic ones; it names the cells that miss one. Writes matrix.json (stamped with
the git tree and the default policies' fingerprint), table.md and heatmap.svg to --out.

Usage: bench/policy_matrix.py --standard [--tessera build/tessera] [--out DIR]
       bench/policy_matrix.py [--trace philly:PATH]... [--cluster 16x4xH100-80GB]...
         [--queues FILE] [--loads 0.5,0.8,1.0] [--checkpoint periodic,signal,lossy]
         [--seeds 1,2,3] [--policies fifo,static-vc,slurm,tiresias,srtf,tessera] [--limit N]
       bench/policy_matrix.py --check-stamp [--tessera build/tessera]
`--standard` runs a fixed set of cells in which every trace, cluster, load band and
checkpoint model appears (about 15 minutes on 2 cores). A trace with "{seed}" in it is
generated anew for each seed; every run also gets the seed as `--seed` (tie-breaks,
users' runtime limits). `--check-stamp` fails when the committed standard matrix
(docs/matrix/latest-standard.txt names its folder) was measured with default policies
other than the binary's. Standard library only.
"""
import argparse
import hashlib
import itertools
import json
import os
import subprocess
import sys
import time

ORACLES = {"srtf"}  # knows every job's runtime: shown, not ranked
GAP_GOAL, JAIN_GOAL = 0.02, 0.9
RHO_GOAL = 1.1  # for a tenant whose demand is within its quota, whatever the others do
CHECKPOINTS = ("periodic", "signal", "lossy")
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
LATEST_STANDARD = os.path.join(REPO, "docs", "matrix", "latest-standard.txt")

# The public traces: TESSERA_TRACES_DIR, else the repository's data/traces (relative to
# the working directory, as the cells record it: data/traces from the repository root).
TRACES = os.environ.get("TESSERA_TRACES_DIR") or os.path.relpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "traces"))
PHILLY = "philly:" + os.path.join(TRACES, "sia/traces/philly.csv")
TIRESIAS = "tiresias:" + os.path.join(TRACES, "tiresias/60_job.csv")
POLLUX = "pollux:" + os.path.join(TRACES, "pollux-adaptdl-workloads/workloads/workload-{n}.csv")
SYNTHETIC = "synthetic:jobs=2000,seed={seed}"
# Larger and longer jobs than the generator's defaults, the tail cut at two days, so
# that the loads below keep the cluster busy (a heavier tail runs on alone long after
# the last arrival, and the cluster then sits mostly idle whatever the load says).
SYNTHETIC_BUSY = ("synthetic:jobs=3000,seed={seed},gpus=1:50/2:15/4:15/8:15/16:5,median=1h,"
                  "sigma=1.5,max=2d")
MIXED = "16x8xH100-80GB+16x8xA100-80GB+32x4xV100-32GB"
# Two tenants with equal quotas (32 GPUs each of 8x8xH100-80GB), t0 submitting ten
# times more jobs than t1; the jobs those of SYNTHETIC_BUSY.
TWO_TENANTS = ("synthetic:jobs=2000,seed={seed},tenant_weights=10/1,"
               "gpus=1:50/2:15/4:15/8:15/16:5,median=1h,sigma=1.5,max=2d")
TWO_TENANTS_QUEUES = os.path.relpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "two-tenants-queues.yaml"))


def standard_groups():
    """(trace, cluster, loads, extra sim-jobs arguments, checkpoint models) groups; each
    runs every seed. Philly runs whole on philly-vc (thinned, its few very long jobs
    leave the cluster nearly idle) and thinned to every 4th job on the clusters without
    quotas, to fit the time bound. The two-tenant case also runs with lossy eviction,
    where preemption ping-pong costs the most."""
    both = ["periodic", "signal"]
    groups = [
        (PHILLY, "philly-vc", [0.9], [], both),
        (PHILLY, "352x8xP100", [1.0], ["--every", "4"], both),
        (PHILLY, "64x8xH100-80GB", [0.8], ["--every", "4"], both),
        # Tiresias' 60 jobs keep only a small cluster busy.
        (TIRESIAS, "4x4xV100-32GB", [0.5, 1.0, 1.3], [], both),
        (SYNTHETIC_BUSY, "64x8xH100-80GB", [0.5, 0.9, 1.3], [], both),
        (SYNTHETIC_BUSY, MIXED, [0.9], [], both),
        (TWO_TENANTS, "8x8xH100-80GB", [1.1, 2.2], ["--queues", TWO_TENANTS_QUEUES],
         list(CHECKPOINTS)),
    ]
    # The eight Pollux workloads, each at one load, the loads spread over the bands.
    pollux_loads = [0.5, 0.8, 1.0, 1.3]
    for n in range(1, 9):
        groups.append((POLLUX.replace("{n}", str(n)), "16x4xV100-32GB",
                       [pollux_loads[(n - 1) % len(pollux_loads)]], [], both))
    return groups


def run_cell(args, index, trace, cluster, load, checkpoint, seed, extra):
    out_dir = os.path.join(args.out, "runs", str(index))
    cmd = [args.tessera, "sim", "jobs", "--trace", trace.replace("{seed}", str(seed)),
           "--cluster", cluster, "--policy", args.policies, "--load", str(load),
           "--seed", str(seed), "--json", "-q", "-j", str(args.threads), "--per-job",
           "--out", out_dir, "--traces-dir", TRACES]
    if checkpoint == "signal":
        cmd.append("--checkpoint-on-signal")
    if checkpoint == "lossy":
        cmd += ["--checkpoint-wait", "0"]
    cmd += extra + ["--checkpoint-minutes", str(args.checkpoint_minutes)]
    if args.restart_overhead:
        cmd += ["--restart-overhead", args.restart_overhead]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(" ".join(cmd) + ": " + out.stderr.strip())
    rows = json.loads(out.stdout)["summary"]
    fairness(rows)
    return rows


def fairness(rows):
    """From the simulator's tenant_rho (per tenant with a quota, against the tenant alone
    on its quota under the same policy) adds rho_max, rho_within_max (the largest rho of
    a tenant whose demand is within its quota), rho_over_1 (the share of jobs slower
    than alone) and sharing_incentive; None where the cluster has no quotas. The
    simulator writes an infinite rho (a job never finished) as null."""
    inf = float("inf")
    for r in rows:
        tenants = r.get("tenant_rho")
        r["rho_max"] = r["rho_within_max"] = r["rho_over_1"] = r["sharing_incentive"] = None
        if not tenants:
            continue
        rhos = [inf if t["rho"] is None else t["rho"] for t in tenants]
        within = [x for x, t in zip(rhos, tenants) if t["within_quota"]]
        r["rho_max"] = max(rhos)
        r["rho_within_max"] = max(within) if within else None
        jobs = sum(t["jobs"] for t in tenants)
        r["rho_over_1"] = sum(t["jobs_over_1"] for t in tenants) / jobs if jobs else None
        # Tolerance for rounding only: equal JCTs are no loss.
        r["sharing_incentive"] = all(x <= 1.0 + 1e-9 for x in rhos)


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
        parts.append(f'<text x="{left + i * cw + 4}" y="{top - 6}">{p[:14]}</text>')
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
                text = f"#{r['rank']} {gap * 100:+.1f}%"
            parts.append(f'<rect x="{left + i * cw}" y="{y}" width="{cw - 2}" height="{ch - 2}" '
                         f'fill="{colour}"/><text x="{left + i * cw + 4}" y="{y + 13}">{text}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def fmt(x, spec, none="-"):
    return none if x is None else format(x, spec)


def table(cells, policies):
    """Markdown: one line per cell and policy."""
    lines = ["| cell | policy | avg JCT (h) | rank | gap | unfinished | Jain | max rho | "
             "max rho within quota | jobs rho>1 | sharing incentive | preemptions |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        for r in c["rows"]:
            if r["policy"] not in policies:
                continue
            si = r.get("sharing_incentive")
            lines.append(
                f"| {c['label']} | {r['policy']} | {r['avg_jct_s'] / 3600:.3f} | "
                f"{fmt(r['rank'], 'd')} | {fmt(r['gap'] and r['gap'] * 100, '+.1f')}% | "
                f"{r['unfinished']} | {r['jain']:.3f} | {fmt(r.get('rho_max'), '.2f')} | "
                f"{fmt(r.get('rho_within_max'), '.2f')} | "
                f"{fmt(r.get('rho_over_1') and r['rho_over_1'] * 100, '.1f')}% | "
                f"{'-' if si is None else ('yes' if si else 'NO')} | {r['preemptions']} |")
    return "\n".join(lines) + "\n"


def judge(cells, policy):
    """The cells where `policy` misses a goal, as (label, reason) pairs."""
    misses = []
    by_key = {}
    for c in cells:
        r = next((x for x in c["rows"] if x["policy"] == policy), None)
        if r is None:
            continue
        if r["gap"] is not None and r["gap"] > GAP_GOAL:
            misses.append((c["label"], f"avg JCT {r['gap'] * 100:+.1f}% from the best"))
        if r["jain"] < JAIN_GOAL:
            misses.append((c["label"], f"Jain {r['jain']:.3f}"))
        if r.get("sharing_incentive") is False:
            misses.append((c["label"], f"sharing incentive (max rho {r['rho_max']:.2f})"))
        if r.get("rho_within_max") is not None and r["rho_within_max"] > RHO_GOAL:
            misses.append((c["label"], f"rho {r['rho_within_max']:.2f} for a tenant within "
                                       f"its quota (goal {RHO_GOAL})"))
        if r["unfinished"]:
            misses.append((c["label"], f"{r['unfinished']} jobs unfinished"))
        if r.get("quota_violations"):
            misses.append((c["label"], f"{r['quota_violations']} cycles broke the core's "
                                       "invariants (quotas, guarantees)"))
        by_key[(c["trace"], c["cluster"], c["load"], c["seed"], c["checkpoint"])] = (c, r)
    for (trace, cluster, load, seed, ckpt), (c, r) in by_key.items():
        if ckpt != "signal":
            continue
        periodic = by_key.get((trace, cluster, load, seed, "periodic"))
        # Worse by more than rounding (0.1 %): two runs that keep the same schedule
        # differ in the last digits of their averages.
        if periodic and r["avg_jct_s"] > periodic[1]["avg_jct_s"] * 1.001:
            worse = r["avg_jct_s"] / periodic[1]["avg_jct_s"] - 1
            misses.append((c["label"], f"on-signal checkpoints make it {worse * 100:.1f}% worse"))
    return misses


def git_stamp():
    """The git commit and tree the run came from, and whether the working tree differed
    from it (then a hash of the difference, so that two runs of one state compare)."""
    def git(*cmd):
        out = subprocess.run(["git", "-C", REPO] + list(cmd), capture_output=True, text=True)
        return out.stdout if out.returncode == 0 else None
    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "tree": None, "dirty": None}
    status = git("status", "--porcelain") or ""
    stamp = {"commit": commit.strip(), "tree": (git("rev-parse", "HEAD^{tree}") or "").strip(),
             "dirty": bool(status.strip())}
    if stamp["dirty"]:
        diff = (git("diff", "HEAD", "--binary") or "") + status
        stamp["diff_sha256"] = hashlib.sha256(diff.encode()).hexdigest()
    return stamp


def defaults_stamp(tessera):
    """`tessera sim jobs --print-defaults`: the default policies' fingerprint."""
    out = subprocess.run([tessera, "sim", "jobs", "--print-defaults"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{tessera} sim jobs --print-defaults: " + out.stderr.strip())
    return json.loads(out.stdout)


def compare(old_path, new_path, policies):
    """Prints, per policy, the cells two matrix.json files share: how many are within
    2 % of the best in each, the worst gap, the largest rho within quota, the lowest
    Jain, and the median and extreme changes of the average JCT, cell by cell."""
    def load(path):
        with open(path) as f:
            cells = json.load(f)["cells"]
        return {(c["trace"], c["cluster"], c["load"], c["checkpoint"], c["seed"],
                 tuple(c.get("args", []))): c for c in cells}
    old, new = load(old_path), load(new_path)
    shared = sorted(set(old) & set(new), key=str)
    print(f"{len(shared)} cells in both ({len(old)} in {old_path}, {len(new)} in {new_path})")
    print(f"{'policy':14s} {'within 2 %':>15s} {'worst gap':>17s} {'lowest Jain':>15s} "
          f"{'avg JCT new/old: median (min..max)':>36s}")
    for policy in policies:
        rows = []
        for k in shared:
            a = next((r for r in old[k]["rows"] if r["policy"] == policy), None)
            b = next((r for r in new[k]["rows"] if r["policy"] == policy), None)
            if a and b and a["avg_jct_s"] > 0:
                rows.append((a, b))
        if not rows:
            continue
        ranked = policy not in ORACLES
        def within(i):
            return sum(1 for x in rows if x[i]["gap"] is not None and x[i]["gap"] <= GAP_GOAL)
        def worst(i):
            return max((x[i]["gap"] or 0) for x in rows) * 100
        ratios = sorted(b["avg_jct_s"] / a["avg_jct_s"] for a, b in rows)
        print(f"{policy[:14]:14s} "
              + (f"{within(0):>5d} -> {within(1):<3d}/{len(rows):<3d} "
                 f"{worst(0):>7.1f} -> {worst(1):5.1f}% " if ranked else f"{'-':>15s} {'-':>17s} ")
              + f"{min(x[0]['jain'] for x in rows):6.3f} -> {min(x[1]['jain'] for x in rows):5.3f} "
              f"{ratios[len(ratios) // 2]:>14.3f} ({ratios[0]:.3f}..{ratios[-1]:.3f})")
    return 0


def check_stamp(tessera, latest=LATEST_STANDARD):
    """0 when the committed standard matrix was measured with the binary's default
    policies; else says what to re-run and returns 1."""
    try:
        with open(latest) as f:
            folder = f.read().strip()
        path = os.path.normpath(os.path.join(os.path.dirname(latest), folder, "matrix.json"))
        with open(path) as f:
            committed = json.load(f).get("stamp", {}).get("defaults", {}).get("fingerprint")
    except (OSError, ValueError, AttributeError) as e:
        print(f"no committed standard matrix to check ({e}); see docs/matrix/index.md",
              file=sys.stderr)
        return 1
    current = defaults_stamp(tessera)["fingerprint"]
    if committed == current:
        print(f"{path}: measured with today's default policies (fingerprint {current})")
        return 0
    why = ("has no stamp (it predates the stamp)" if committed is None else
           f"was measured with default policies of fingerprint {committed}")
    print(f"{path} {why}; the binary's default policies have fingerprint {current}.\n"
          "The committed matrix is stale: re-run the standard matrix with a release build,\n"
          "  mkdir -p out && bench/policy_matrix.py --standard --tessera build/release/tessera "
          "--out out/matrix "
          "| tee out/matrix-summary.txt\n"
          "copy its matrix.json, table.md and heatmap.svg, and out/matrix-summary.txt as "
          "summary.txt, to docs/matrix/standard-<date>/, and write that folder's name in "
          "docs/matrix/latest-standard.txt (docs/matrix/index.md).", file=sys.stderr)
    return 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tessera", default="build/tessera")
    p.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"),
                   help="compare two runs' matrix.json on the cells they share, and exit")
    p.add_argument("--standard", action="store_true", help="the standard set of cells")
    p.add_argument("--trace", action="append", dest="traces")
    p.add_argument("--cluster", action="append", dest="clusters")
    p.add_argument("--queues", default="", help="queue tree YAML for every cell (sim jobs)")
    p.add_argument("--check-stamp", action="store_true",
                   help="check the committed standard matrix's stamp against --tessera")
    p.add_argument("--loads", default="0.5,0.8,1.0")
    p.add_argument("--checkpoint", default=None,
                   help="checkpoint models (default: periodic,signal; with --standard each "
                        "group's own)")
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--policies", default="fifo,static-vc,slurm,tiresias,srtf,tessera")
    p.add_argument("--judge", default="tessera", help="the policy whose goals are checked")
    p.add_argument("--limit", type=int, default=0, help="replay only the first N jobs")
    p.add_argument("--restart-overhead", default="", help="sim jobs' default unless given")
    # Longer than the 30-minute checkpoint wait: with an interval at most the wait every
    # victim reaches a checkpoint within it, loses nothing, and the two checkpoint models
    # give the same schedule.
    p.add_argument("--checkpoint-minutes", type=float, default=60,
                   help="jobs' periodic checkpoint interval (default 60)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--out", default="out/matrix")
    args = p.parse_args()
    try:
        loads = [float(x) for x in args.loads.split(",")]
        seeds = [int(x) for x in args.seeds.split(",")]
    except ValueError:
        p.error("--loads takes numbers and --seeds whole numbers, comma-separated")
    if args.check_stamp:
        return check_stamp(args.tessera)
    if args.compare:
        return compare(args.compare[0], args.compare[1], args.policies.split(","))
    checkpoints = (args.checkpoint.split(",") if args.checkpoint else
                   list(CHECKPOINTS) if args.standard else ["periodic", "signal"])
    if any(c not in CHECKPOINTS for c in checkpoints):
        p.error("--checkpoint takes periodic, signal and/or lossy")
    if any(x <= 0 for x in loads):
        p.error("--loads must be positive")
    if args.standard and (args.traces or args.clusters or args.queues):
        p.error("--standard names its own traces, clusters and queues")
    if args.standard:
        # Its own checkpoint models per group unless --checkpoint narrows them.
        groups = [(t, c, l, e, [k for k in ks if k in checkpoints])
                  for t, c, l, e, ks in standard_groups()]
    else:
        extra = (["--limit", str(args.limit)] if args.limit else []) + (
            ["--queues", args.queues] if args.queues else [])
        groups = [(t, c, loads, extra, checkpoints) for t in (args.traces or [SYNTHETIC])
                  for c in (args.clusters or ["16x4xH100-80GB"])]
    combos = [(t, c, load, ckpt, seed, extra) for t, c, group_loads, extra, ckpts in groups
              for load, ckpt, seed in itertools.product(group_loads, ckpts, seeds)]
    policies = args.policies.split(",")
    os.makedirs(args.out, exist_ok=True)

    # The stamp: from the binary that runs the cells, before they run.
    stamp = {"git": git_stamp(), "defaults": defaults_stamp(args.tessera),
             "tessera": args.tessera, "argv": sys.argv[1:]}
    started = time.time()
    cells = []
    for n, (trace, cluster, load, checkpoint, seed, extra) in enumerate(combos, 1):
        rows = rank(run_cell(args, n, trace, cluster, load, checkpoint, seed, extra))
        label = (f"{trace_label(trace)}{' ' + ' '.join(extra) if extra else ''} {cluster} "
                 f"load {load} {checkpoint} seed {seed}")
        cells.append({"trace": trace, "cluster": cluster, "load": load, "args": extra,
                      "checkpoint": checkpoint, "seed": seed, "label": label, "rows": rows})
        print(f"[{n}/{len(combos)} {time.time() - started:.0f}s] {label}: " + "  ".join(
            f"{r['policy']} {r['avg_jct_s'] / 3600:.2f}h"
            + (f" #{r['rank']} {r['gap'] * 100:+.1f}%" if r["rank"] else "")
            + (f" ({r['unfinished']} unfinished)" if r["unfinished"] else "")
            for r in rows), flush=True)
    seconds = time.time() - started

    print(f"\n{len(cells)} cells in {seconds:.0f} s ({seconds / 60:.1f} min)")
    print(f"{'policy':14s} {'within 2 %':>11s} {'worst gap':>10s} {'lowest jain':>12s} "
          f"{'max rho':>8s} {'rho in quota':>13s} {'SI held':>9s}")
    for policy in policies:
        mine = [r for c in cells for r in c["rows"] if r["policy"] == policy]
        ranked = [r for r in mine if r["gap"] is not None and policy not in ORACLES]
        si = [r["sharing_incentive"] for r in mine if r.get("sharing_incentive") is not None]
        rho = [r["rho_max"] for r in mine if r.get("rho_max") is not None]
        rho_in = [r["rho_within_max"] for r in mine if r.get("rho_within_max") is not None]
        within = sum(1 for r in ranked if r["gap"] <= GAP_GOAL)
        print(f"{policy[:14]:14s} {within:>5d} / {len(ranked):<4d} "
              f"{fmt(max((r['gap'] for r in ranked), default=None) and max(r['gap'] for r in ranked) * 100, '9.1f', '        -')}% "
              f"{min(r['jain'] for r in mine):>12.3f} {fmt(max(rho, default=None), '8.2f', '       -')} "
              f"{fmt(max(rho_in, default=None), '13.2f', '            -')} "
              f"{sum(si):>4d} / {len(si):<3d}")
    # The core's invariant check, counted by every run (quotas, and the guarantee that
    # no queue within its nominal quota is preempted by another queue's job).
    violations = {}
    for c in cells:
        for r in c["rows"]:
            violations[r["policy"]] = violations.get(r["policy"], 0) + r.get("quota_violations", 0)
    print("cycles breaking the core's invariants, all cells: " +
          ", ".join(f"{p} {n}" for p, n in violations.items()))
    misses = judge(cells, args.judge)
    print(f"\n{args.judge}: {len(misses)} missed goals in {len(set(m[0] for m in misses))} of "
          f"{len(cells)} cells")
    for label, why in misses:
        print(f"  {label}: {why}")
    with open(os.path.join(args.out, "matrix.json"), "w") as f:
        json.dump({"stamp": stamp, "cells": cells, "seconds": round(seconds, 1),
                   "judge": args.judge,
                   "misses": [{"cell": m[0], "goal": m[1]} for m in misses]}, f, indent=1)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table(cells, policies))
    heatmap(cells, policies, os.path.join(args.out, "heatmap.svg"))
    print(f"results in {args.out}/ (matrix.json, table.md, heatmap.svg); default policies' "
          f"fingerprint {stamp['defaults']['fingerprint']}, git tree {stamp['git']['tree']}"
          f"{' (with uncommitted changes)' if stamp['git']['dirty'] else ''}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print("policy_matrix: " + str(e), file=sys.stderr)
        sys.exit(1)
