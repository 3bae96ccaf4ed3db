#!/usr/bin/env python3
"""Lists functions longer than a bound (default 120 lines) in C++ files.

A brace-matching scan, not a parser: a function starts at a line in column 0 that ends
with '{' after a parameter list, and ends where its braces close. Raw strings with
unbalanced braces can mislead it. Usage: scripts/long-functions.py [--max N] FILE...
(default: every tracked .cc file under src/ and tests/). Exits 1 when it lists any.
"""
import subprocess
import sys

NOT_FUNCTIONS = ("namespace", "class", "struct", "enum", "extern", "union")


def long_functions(path, bound):
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        head = "".join(lines[max(0, i - 3):i + 1])
        if (line and not line[0].isspace() and line.rstrip().endswith("{") and "(" in head
                and not line.startswith(NOT_FUNCTIONS) and "=" not in line.split("(")[0]):
            depth, j = 0, i
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                if depth == 0 and j > i:
                    break
                j += 1
            if j - i + 1 > bound:
                yield i + 1, j - i + 1, line[:90]
            i = j + 1
        else:
            i += 1


def main(argv):
    bound = 120
    if argv[:1] == ["--max"]:
        bound, argv = int(argv[1]), argv[2:]
    files = argv or subprocess.run(["git", "ls-files", "src/*.cc", "tests/*.cc"],
                                   capture_output=True, text=True, check=True).stdout.split()
    found = 0
    for path in files:
        for line, length, text in long_functions(path, bound):
            print(f"{path}:{line}: {length} lines: {text}")
            found += 1
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
