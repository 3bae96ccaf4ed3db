#!/usr/bin/env python3
"""Compiles the server and the agent with `clang++ -Wthread-safety -Werror`.

The lock discipline (which lock guards which member, which function needs it held) is
written as Clang's thread-safety annotations (src/base/thread_annotations.h, used through
src/base/mutex.h); this check is what makes them bind. It reads the compile commands of a
configured build folder (the generated protobuf headers must exist there: run it after
that build), swaps the compiler for clang++, drops GCC's precompiled header and its
GCC-only warning flags, and runs a syntax-only pass (the analysis needs no code
generation) over every production file under the given folders, two at a time, through
a Clang precompiled header of the same standard headers. Files with the same flags are
checked in batches, one translation unit each (the headers they share are then parsed
once); a batch that fails is checked again in halves, down to single files, so that a
name two files both define cannot fail the check and each diagnostic names its file.

Usage: scripts/thread-safety-check.py [--build DIR] [--jobs N] [FOLDER...]
(default: build/ci, 2 jobs, src/server, src/agent and src/store). Exits 1 on any diagnostic.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

# Parsed once into a Clang precompiled header: the standard headers and libraries most
# files include, and the project headers most of the checked files start from (the
# analysis of what they define inline is then done, and reported, once).
PCH_HEADERS = ["<algorithm>", "<chrono>", "<filesystem>", "<fstream>", "<functional>",
               "<iostream>", "<map>", "<memory>", "<mutex>", "<optional>", "<set>",
               "<sstream>", "<string>", "<thread>", "<unordered_map>", "<vector>",
               "<nlohmann/json.hpp>", "<httplib.h>", '"server/controller.h"', '"server/http/server.h"',
               '"agent/agent.h"']
GCC_ONLY = {"-Wno-restrict", "-Wno-stringop-overflow", "-Wno-array-bounds", "-Winvalid-pch"}
CHECK_FLAGS = ["-fsyntax-only", "-Wthread-safety", "-Werror"]
# Files per batch: enough to share the headers' parse, few enough that the two workers
# get batches of similar length and a failing batch is cheap to check again in halves.
BATCH_FILES = 12


def clang_args(command, repo):
    """The compile command as clang++ arguments, without output, PCH or GCC-only flags."""
    args = shlex.split(command)
    out, i = ["clang++"], 1
    while i < len(args):
        a = args[i]
        if a in ("-o", "-include", "-c"):
            # "-o X", "-include <GCC's PCH>", "-c FILE": the file is added back at the end.
            i += 2
            continue
        if a not in GCC_ONLY:
            out.append(a)
        i += 1
    return out


def sources_of(path):
    """The files a compile command compiles: a unity build's batch (CMake's
    Unity/unity_N_cxx.cxx) stands for the files it includes, each checked on its own
    flags."""
    if "/Unity/unity_" not in path:
        return [path]
    with open(path) as f:
        return re.findall(r'^#include "([^"]+)"', f.read(), re.M)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build/ci")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("folders", nargs="*", default=["src/server", "src/agent", "src/store"])
    opts = parser.parse_args(argv)
    repo = os.getcwd()
    db_path = os.path.join(opts.build, "compile_commands.json")
    if not os.path.exists(db_path):
        print(f"thread-safety: no {db_path}: configure and build that folder first", file=sys.stderr)
        return 2
    # A folder, or the start of file names ("src/server/controller").
    prefixes = [os.path.join(repo, f.rstrip("/")) + ("/" if os.path.isdir(f) else "")
                for f in opts.folders]
    entries = []
    for e in json.load(open(db_path)):
        for path in sources_of(e["file"]):
            if (any(path.startswith(p) for p in prefixes) and not path.endswith("_test.cc")
                    and "/testing/" not in path):
                entries.append((path, e["directory"], clang_args(e["command"], repo)))
    if not entries:
        print("thread-safety: no files to check under " + " ".join(opts.folders), file=sys.stderr)
        return 2

    # One Clang precompiled header, for the files that share the most common flags (most
    # of them); others parse without it.
    with tempfile.TemporaryDirectory(prefix="tessera-tsa-") as pch_dir:
        return check_all(entries, repo, pch_dir, opts.jobs)


def check_all(entries, repo, pch_dir, jobs):
    """Checks `entries` through a precompiled header made in `pch_dir`; the exit status."""
    pch = os.path.join(pch_dir, "std.pch")
    header = os.path.join(pch_dir, "std.h")
    with open(header, "w") as f:
        f.write("".join(f"#include {h}\n" for h in PCH_HEADERS))
    flag_sets = collections.Counter(tuple(args[1:]) for _, _, args in entries)
    base_flags = list(flag_sets.most_common(1)[0][0])
    # Templates instantiated once in the header, not again in every file: 2-4x faster.
    built = subprocess.run(["clang++", *base_flags, *CHECK_FLAGS[1:], "-fpch-instantiate-templates",
                            "-x", "c++-header", header, "-o", pch], capture_output=True, text=True)
    use_pch = built.returncode == 0
    if not use_pch:
        # Each file then parses the headers itself and reports what is wrong in them.
        print("thread-safety: no precompiled header (each file parses its own):\n" +
              built.stderr[-2000:])

    def compile(flags, directory, path):
        extra = ["-include-pch", pch] if use_pch and list(flags) == base_flags else []
        return subprocess.run(["clang++", *flags, *extra, *CHECK_FLAGS, path], cwd=directory,
                              capture_output=True, text=True)

    def check(batch):
        """[(path, rc, stderr, seconds)] for a batch of files sharing flags and folder."""
        began = time.time()
        flags, directory = tuple(batch[0][2][1:]), batch[0][1]
        if len(batch) == 1:
            run = compile(flags, directory, batch[0][0])
            return [(batch[0][0], run.returncode, run.stderr, time.time() - began)]
        unity = os.path.join(pch_dir, f"batch{id(batch)}.cc")
        with open(unity, "w") as f:
            f.write("".join(f'#include "{path}"\n' for path, _, _ in batch))
        if compile(flags, directory, unity).returncode == 0:
            share = (time.time() - began) / len(batch)
            return [(path, 0, "", share) for path, _, _ in batch]
        # A diagnostic, or two files defining one name: each half on its own.
        half = len(batch) // 2
        return check(batch[:half]) + check(batch[half:])

    # The check must be able to fail: an access without its lock is refused here first
    # (were the annotations to expand to nothing, every file would pass).
    bite = os.path.join(pch_dir, "bite.cc")
    with open(bite, "w") as f:
        f.write('#include "base/mutex.h"\n'
                "struct Bite {\n  tessera::Mutex mu;\n  int n GUARDED_BY(mu) = 0;\n"
                "  void Unlocked() { ++n; }\n};\n")
    bitten = subprocess.run(["clang++", "-std=c++20", "-I", os.path.join(repo, "src"), *CHECK_FLAGS,
                             bite], capture_output=True, text=True)
    if bitten.returncode == 0 or "requires holding mutex" not in bitten.stderr:
        print("thread-safety: an unguarded access compiled: the analysis is not active",
              file=sys.stderr)
        return 1

    start = time.time()
    failed = 0
    slowest = []
    groups = collections.defaultdict(list)
    for entry in entries:
        groups[(entry[1], tuple(entry[2][1:]))].append(entry)
    batches = [g[i:i + BATCH_FILES] for g in groups.values() for i in range(0, len(g), BATCH_FILES)]
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for results in pool.map(check, batches):
            for path, rc, err, seconds in results:
                slowest.append((seconds, os.path.relpath(path, repo)))
                if rc != 0:
                    failed += 1
                    sys.stdout.write(err)
    slowest.sort(reverse=True)
    print("thread-safety: slowest (a batch's time shared among its files) " +
          ", ".join(f"{p} {t:.1f} s" for t, p in slowest[:4]))
    print(f"thread-safety: {len(entries)} files, "
          f"{failed} failed, {time.time() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
