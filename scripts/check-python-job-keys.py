#!/usr/bin/env python3
"""Checks that the Python client writes only keys the job codec accepts.

The client keeps job specs as plain dicts, so a misspelled key ("submitdir") would
surface only as the controller's "unknown key" error. This reads the keys the client
writes from its source (ast: `doc["key"] = ...`, `"key" in doc`, dict literals assigned
to `doc`/`spec`, and `_yaml_with_field(text, "key", ...)`) and looks each up in the
codec's own lists, as the build's `job_spec_keys` prints them (src/api/job_keys.h).
Keys written inside `submit_batch` belong to a batch document (job_batch.h); the rest
to a job.

Usage: scripts/check-python-job-keys.py JOB_SPEC_KEYS_BINARY CLIENT_PACKAGE_DIR
Exits 1 naming each unknown key and where it is written.
"""
import ast
import difflib
import pathlib
import re
import subprocess
import sys

DOC_NAMES = {"doc", "spec"}  # the names the client gives a job or batch document
KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def codec_keys(binary):
    keys = {"job": set(), "batch": set()}
    out = subprocess.run([binary], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        kind, key = line.split(" ", 1)
        # A top-level key is what the client writes; nested ones are dict values.
        keys[kind].add(key.split(".")[0])
    return keys


def _const_str(node):
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_doc(node):
    return isinstance(node, ast.Name) and node.id in DOC_NAMES


def written_keys(tree):
    """(key, line, function) for each key the module writes into a document."""
    found = []

    def visit(node, function):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            if _is_doc(node.value) and _const_str(node.slice) is not None:
                found.append((_const_str(node.slice), node.lineno, function))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            if isinstance(node.ops[0], (ast.In, ast.NotIn)) and _is_doc(node.comparators[0]):
                # `spec` may be the job file's text too: `":" in spec` is no key.
                if KEY.match(_const_str(node.left) or ""):
                    found.append((_const_str(node.left), node.lineno, function))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            if any(_is_doc(t) for t in node.targets):
                for k in node.value.keys:
                    if _const_str(k) is not None:
                        found.append((_const_str(k), node.lineno, function))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "_yaml_with_field" and len(node.args) >= 2:
                if _const_str(node.args[1]) is not None:
                    found.append((_const_str(node.args[1]), node.lineno, function))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, None)
    return found


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    keys = codec_keys(argv[1])
    if not keys["job"] or not keys["batch"]:
        print("check-python-job-keys: %s listed no keys" % argv[1], file=sys.stderr)
        return 1
    bad = []
    seen = 0
    for path in sorted(pathlib.Path(argv[2]).glob("*.py")):
        for key, line, function in written_keys(ast.parse(path.read_text(), str(path))):
            seen += 1
            kind = "batch" if function == "submit_batch" else "job"
            if key not in keys[kind]:
                near = difflib.get_close_matches(key, sorted(keys[kind]), n=1)
                hint = " (did you mean '%s'?)" % near[0] if near else ""
                bad.append("%s:%d: '%s' is not a key of a %s document%s"
                           % (path, line, key, kind, hint))
    if seen == 0:
        # The patterns above no longer match the client: the check would pass vacuously.
        print("check-python-job-keys: found no document keys in %s" % argv[2], file=sys.stderr)
        return 1
    for b in bad:
        print(b, file=sys.stderr)
    if not bad:
        print("check-python-job-keys: %d key uses, all the codec's" % seen)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
