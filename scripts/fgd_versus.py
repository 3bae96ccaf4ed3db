#!/usr/bin/env python3
"""Per pod list, one policy against another, seed by seed, from `tessera sim fgd` output.

Reads DIR/analysis_allo_discrete.csv (one row per run) and prints, per pod list, each
policy's mean unallocated GPU % at 100 % arrived over the seeds, and on how many seeds
the first policy left fewer GPUs unallocated than the second (ties count as losses).
The median table of `summary.txt` hides a list lost on most seeds by a small margin;
this one does not.

  scripts/fgd_versus.py out/fgd-pin-single [--a tessera] [--b fgd] [--markdown]
"""
import argparse
import csv
import sys
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--a", default="tessera")
    ap.add_argument("--b", default="fgd")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    labels = {"tessera": "07-Tessera", "fgd": "06-FGD", "bestfit": "05-BestFit"}  # as written
    want = {args.a: labels.get(args.a, args.a), args.b: labels.get(args.b, args.b)}
    runs = defaultdict(dict)  # (trace, policy) -> seed -> unallocated %
    order = []
    with open(f"{args.dir}/analysis_allo_discrete.csv") as f:
        for row in csv.DictReader(f):
            for name, label in want.items():
                if row["sc_policy"] in (name, label):
                    trace = row["workload"].removeprefix("openb_pod_list_")
                    if trace not in order:
                        order.append(trace)
                    runs[(trace, name)][row["seed"]] = 100.0 - float(row["100"])
    rows = []
    for trace in order:
        a, b = runs.get((trace, args.a), {}), runs.get((trace, args.b), {})
        seeds = sorted(set(a) & set(b))
        if not seeds:
            continue
        mean_a = sum(a[s] for s in seeds) / len(seeds)
        mean_b = sum(b[s] for s in seeds) / len(seeds)
        wins = sum(1 for s in seeds if a[s] < b[s])
        rows.append((trace, mean_a, mean_b, wins, len(seeds)))
    if args.markdown:
        print(f"| pod list | {args.a} mean | {args.b} mean | {args.a} better on |")
        print("| --- | --- | --- | --- |")
        for t, ma, mb, w, n in rows:
            print(f"| {t} | {ma:.2f} | {mb:.2f} | {w}/{n} |")
    else:
        print(f"{'pod list':22} {args.a + ' mean':>14} {args.b + ' mean':>10} {'wins':>6}")
        for t, ma, mb, w, n in rows:
            print(f"{t:22} {ma:14.2f} {mb:10.2f} {w:>3}/{n}")
    lost = [t for t, ma, mb, w, n in rows if ma >= mb]
    print(f"\n{args.a} below {args.b} on mean in {len(rows) - len(lost)} of {len(rows)} lists"
          + (f"; not on: {', '.join(lost)}" if lost else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
