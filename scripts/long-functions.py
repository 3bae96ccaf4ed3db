#!/usr/bin/env python3
"""Lists C++ functions whose bodies are longer than a bound (default 120 lines).

A function's length is counted as clang-tidy's readability-function-size counts it: the
line of the body's closing brace less the line of its opening brace. The scan tokenises
enough of C++ to find every function body, at namespace scope and inside class bodies:
comments, string and character literals (raw strings included) and preprocessor lines
are set aside first, then each '{' is classified by what precedes it (a namespace,
class, enum or initializer's brace is not a function's; a body follows a parameter
list, its qualifiers and a constructor's initializers). Lambdas and local classes count
within the function that holds them.

Files are bounded too (default 800 lines).

Usage: scripts/long-functions.py [--max N] [--max-file-lines N] [--production]
                                 [--max-core-lines N] [FILE...]
  default files: every tracked .cc and .h under src/; --production leaves out tests
  (*_test.cc, testing/ folders) and the benchmarks. Exits 1 when it lists any.
  --max-core-lines N: also exits 1 when the controller's core (its production files
  src/server/controller*.{h,cc}) is over N lines.
       scripts/long-functions.py --against-clang-tidy BUILD --max N FILE.cc...
  runs clang-tidy's readability-function-size (LineThreshold N) on the files with BUILD's
  compile commands and prints each function over N lines where the two counts differ
  (slow: a full parse per file). Exits 1 on any difference.
"""
import re
import subprocess
import sys

CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof",
           "noexcept", "requires", "static_assert", "co_return", "co_await", "throw"}
SCOPES = re.compile(r"\b(namespace|class|struct|union|enum)\b|extern\s*$|=\s*$")
# What may stand between a parameter list's ')' and the body's '{': qualifiers, and
# annotations written as calls (noexcept(...), REQUIRES(mu_), __attribute__((...))).
QUALIFIER = re.compile(r"(?:\bconst|\bvolatile|\boverride|\bfinal|\bmutable|\bnoexcept|&&|&)$")
ANNOTATION = re.compile(r"^(?:noexcept|__attribute__|alignas|[A-Z][A-Z0-9_]+)$")
ACCESS = re.compile(r"^\s*(?:(?:public|private|protected)\s*:(?!:)\s*)+")


def strip(text):
    """The text with comments, literals and preprocessor lines blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            # A preprocessor line, with its continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if c == "\n":
            at_line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        m = re.match(r'(?:u8|[uUL])?R"([^()\\\s]{0,16})\(', text[i:i + 24])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + m.group(1) + '"'
            end = text.find(close, i + m.end())
            end = n if end < 0 else end + len(close)
            out.append('"' + re.sub(r"[^\n]", " ", text[i + 1:end - 1]) + '"')
            i = end
            continue
        if c in "\"'":
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def matching_open(text, close):
    """The index of the '(' that the ')' at `close` closes; -1 when there is none."""
    depth = 0
    for k in range(close, -1, -1):
        if text[k] == ")":
            depth += 1
        elif text[k] == "(":
            depth -= 1
            if depth == 0:
                return k
    return -1


def top_level(text, token):
    """The index of the last `token` outside brackets in `text`; -1 when there is none."""
    depth = 0
    found = -1
    for k, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and text.startswith(token, k):
            found = k
    return found


def opens_function(head):
    """The function's name when code `head` (since the last statement or brace) ends in a
    function's head; "lambda" for a lambda's; None otherwise."""
    head = ACCESS.sub("", head.strip())
    if not head or (SCOPES.search(head.split("(")[0]) and not re.search(r"\boperator\b", head)):
        return None
    # A constructor's initializers: ") : a_(x), b_(y)" -> judge the part before them.
    depth = 0
    for k, ch in enumerate(head):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == ":" and depth == 0 and head[k - 1:k + 1] != "::" and head[k:k + 2] != "::":
            if head[:k].rstrip().endswith(")"):
                head = head[:k]
            break
    # Peel qualifiers, annotations and a trailing return type off the end.
    rest = head.rstrip()
    for _ in range(32):
        rest = rest.rstrip()
        m = QUALIFIER.search(rest)
        if m:
            rest = rest[:m.start()]
            continue
        if rest.endswith(")"):
            k = matching_open(rest, len(rest) - 1)
            if k < 0:
                return None
            word = re.search(r"([\w~]+)\s*$", rest[:k])
            if word and ANNOTATION.match(word.group(1)):
                rest = rest[:word.start()]
                continue
            before = rest[:k].rstrip()
            if before.endswith("]"):
                return "lambda"
            name = re.search(r"(~?[\w:]+|operator\s*\S+)\s*(?:<[^<>]*>)?$", before)
            if not name or name.group(1).split("::")[-1] in CONTROL:
                return None
            return name.group(1)
        arrow = top_level(rest, "->")
        if arrow > 0:
            rest = rest[:arrow]
            continue
        return None
    return None


def functions(path):
    """(name, first line, length) of each function body at namespace or class scope."""
    code = strip(open(path, encoding="utf-8", errors="replace").read())
    stack = []  # (kind, line): kind "function", "scope" or "block"
    head_start = 0
    line = 1
    for i, ch in enumerate(code):
        if ch == "\n":
            line += 1
        elif ch == "{":
            inside_function = any(kind == "function" for kind, _, _ in stack)
            head = code[head_start:i]
            name = None if inside_function else opens_function(head)
            if name and name != "lambda":
                stack.append(("function", line, name))
            elif not inside_function and re.search(r"[\w>\]]\s*$|[=,(]\s*$|return\s*$", head) and \
                    not SCOPES.search(head) and not re.search(r"\b(else|do|try)\s*$", head):
                stack.append(("init", line, None))  # a braced initializer
                continue  # the head goes on after it
            else:
                stack.append(("scope" if not inside_function else "block", line, None))
            head_start = i + 1
        elif ch == "}":
            if not stack:
                continue
            kind, opened, name = stack.pop()
            if kind == "function":
                yield name, opened, line - opened
            if kind != "init":
                head_start = i + 1
        elif ch == ";" and not any(kind == "init" for kind, _, _ in stack):
            head_start = i + 1


def against_clang_tidy(build, bound, files):
    """Compares this scan with clang-tidy's readability-function-size on `files`."""
    import importlib.util
    import json
    import os
    import tempfile
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("tsa", os.path.join(here, "thread-safety-check.py"))
    tsa = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tsa)
    repo = os.getcwd()
    # A unity build's batch stands for the files it includes (tsa.sources_of).
    db = [{"directory": e["directory"], "file": path,
           "arguments": tsa.clang_args(e["command"], repo) + [path]}
          for e in json.load(open(os.path.join(build, "compile_commands.json")))
          for path in tsa.sources_of(e["file"])]
    tmp = tempfile.mkdtemp(prefix="tessera-tidy-")
    with open(os.path.join(tmp, "compile_commands.json"), "w") as f:
        json.dump(db, f)
    config = "{CheckOptions: [{key: readability-function-size.LineThreshold, value: %d}]}" % bound
    same = differ = 0
    for path in files:
        run = subprocess.run(["clang-tidy", "-p", tmp, "--quiet", "--checks=-*,readability-function-size",
                              "--config=" + config, path], capture_output=True, text=True)
        names = re.findall(r"warning: function '([^']+)' exceeds", run.stdout)
        lengths = re.findall(r"note: (\d+) lines including", run.stdout)
        tidy = sorted(zip([n.split("::")[-1] for n in names], map(int, lengths)))
        mine = sorted((n.split("::")[-1], length) for n, _, length in functions(path) if length > bound)
        if tidy == mine:
            same += len(mine)
        else:
            differ += 1
            print(f"{path}: clang-tidy {tidy}, this scan {mine}")
    print(f"against clang-tidy: {len(files)} files, {same} functions over {bound} lines alike, "
          f"{differ} files differ")
    return 1 if differ else 0


def production(path):
    return not (path.endswith("_test.cc") or "/testing/" in path or path.startswith("bench/"))


def core_lines():
    """The controller's core: its production files (src/server/controller*.{h,cc})."""
    import glob
    found = glob.glob("src/server/controller*.h") + glob.glob("src/server/controller*.cc")
    paths = sorted(p for p in found if production(p) and "fixture" not in p)
    total = 0
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            total += sum(1 for _ in f)
    return total, len(paths)


def main(argv):
    bound = 120
    file_bound = 800
    core_bound = None
    only_production = False
    files = []
    tidy_build = None
    while argv:
        if argv[0] == "--against-clang-tidy":
            tidy_build, argv = argv[1], argv[2:]
        elif argv[0] == "--max":
            bound, argv = int(argv[1]), argv[2:]
        elif argv[0] == "--max-file-lines":
            file_bound, argv = int(argv[1]), argv[2:]
        elif argv[0] == "--max-core-lines":
            core_bound, argv = int(argv[1]), argv[2:]
        elif argv[0] == "--production":
            only_production, argv = True, argv[1:]
        else:
            files, argv = argv, []
    if not files:
        listed = subprocess.run(["git", "ls-files", "src/*.cc", "src/*.h"], capture_output=True,
                                text=True)
        if listed.returncode == 0:
            import os
            # A tracked file deleted in the working tree (not yet committed) is gone.
            files = [f for f in listed.stdout.split() if os.path.exists(f)]
        else:  # not a git checkout (a source archive): every file under src/
            import os
            files = sorted(os.path.join(d, f) for d, _, names in os.walk("src") for f in names
                           if f.endswith((".cc", ".h")))
    if only_production:
        files = [f for f in files if production(f)]
    if tidy_build:
        return against_clang_tidy(tidy_build, bound, files)
    found = 0
    longest = (0, "")
    long_files = 0
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = sum(1 for _ in f)
        if lines > file_bound:
            print(f"{path}: {lines} lines (file bound {file_bound})")
            long_files += 1
        for name, line, length in functions(path):
            if length > longest[0]:
                longest = (length, f"{path}:{line} {name}")
            if length > bound:
                print(f"{path}:{line}: {name}: {length} lines (bound {bound})")
                found += 1
    print(f"long-functions: {len(files)} files, {found} functions over {bound} lines, "
          f"{long_files} files over {file_bound}; the longest function {longest[0]} lines "
          f"({longest[1]})")
    core_over = False
    if core_bound is not None:
        # A ratchet: the core may shrink, never grow (docs/architecture.md, "The controller").
        core, count = core_lines()
        core_over = core > core_bound
        print(f"controller core: {core} lines in {count} files (bound {core_bound})"
              + (" -- over the bound" if core_over else ""))
    return 1 if found or long_files or core_over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
