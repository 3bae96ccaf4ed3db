#!/usr/bin/env python3
"""The manual pages the build writes (`tessera man`, cmake/Packaging.cmake) against the
command line itself: every command that `tessera --help` lists, and the commands those
list in turn (`tessera sim --help`, `tessera server --help` from tesserad, ...), has its
page (`tessera-sim-jobs.1` for `tessera sim jobs`) and no page is left over; each page
has the sections of a manual page and names every option its command's help lists;
every page renders without a warning (but "can't break line"; groff, when installed),
and `man -l` shows one.

Usage: man_pages_test.py TESSERA_BINARY MAN_DIR
"""
import gzip
import os
import re
import shutil
import subprocess
import sys
import unittest

TESSERA = ""
MAN_DIR = ""


def run_help(words):
    out = subprocess.run([TESSERA, *words, "--help"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise AssertionError(f"tessera {' '.join(words)} --help exited {out.returncode}: {out.stderr}")
    return out.stdout


def parse_help(text):
    """(subcommand names, long option names) of one command's --help (CLI11's layout:
    unindented "Section:" headers, then entries indented by two spaces; continuation
    lines indented further)."""
    section = ""
    subs, options = [], []
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            section = line[:-1]
            continue
        m = re.match(r"^  (\S+)", line)
        if not m:
            continue
        first = m.group(1)
        if section == "Subcommands":
            subs.append(first)
        elif first.startswith("-"):
            options += [n for n in first.split(",") if n.startswith("--")]
    return subs, options


def walk():
    """Every visible command path, from the root, with its options: {(words): [options]}."""
    commands = {}
    todo = [()]
    while todo:
        words = todo.pop()
        subs, options = parse_help(run_help(list(words)))
        commands[words] = options
        todo += [words + (s,) for s in subs]
    return commands


def page_name(words):
    return "-".join(("tessera",) + words) + ".1"


def roff_option(name):
    return name.replace("-", "\\-")


class ManPagesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.commands = walk()

    def test_walk_found_the_commands(self):
        # A sanity check of the help parsing: the nested and the daemon commands are there.
        for words in [(), ("submit",), ("sim", "jobs"), ("server",), ("agent",), ("store", "migrate"),
                      ("nodes", "remove"), ("queues", "set")]:
            self.assertIn(words, self.commands)
        self.assertIn("--data", self.commands[("server",)])
        self.assertIn("--token-file", self.commands[("agent",)])

    def test_every_command_has_a_page_and_no_page_is_left_over(self):
        expected = {page_name(w) for w in self.commands}
        have = {f for f in os.listdir(MAN_DIR) if f.endswith(".1")}
        self.assertEqual(sorted(expected - have), [], "commands without a page")
        self.assertEqual(sorted(have - expected), [], "pages without a command")
        gz = {f[:-3] for f in os.listdir(MAN_DIR) if f.endswith(".1.gz")}
        self.assertEqual(gz, have, "every page is also compressed for installing")

    def test_pages_have_the_sections_and_the_options(self):
        for words, options in self.commands.items():
            name = page_name(words)
            with open(os.path.join(MAN_DIR, name), encoding="ascii") as f:
                text = f.read()
            with gzip.open(os.path.join(MAN_DIR, name + ".gz"), "rt", encoding="ascii") as f:
                self.assertEqual(f.read(), text, f"{name}.gz is {name} compressed")
            self.assertRegex(text, r'(?m)^\.TH "' + re.escape(name[:-2].upper().replace("-", "\\-")),
                             name)
            for section in ["NAME", "SYNOPSIS", "DESCRIPTION"]:
                self.assertRegex(text, rf"(?m)^\.SH {section}$", f"{name}: {section}")
            self.assertIn(f"{name[:-2].replace('-', chr(92) + '-')} \\- ", text, f"{name}: NAME line")
            if options:
                self.assertRegex(text, r"(?m)^\.SH OPTIONS$", name)
            for option in options:
                self.assertIn(f"\\fB{roff_option(option)}\\fR", text, f"{name}: option {option}")
            if words:
                self.assertRegex(text, r"(?m)^\.SH SEE ALSO$", name)
                parent = page_name(words[:-1])[:-2].replace("-", "\\-")
                self.assertIn(f"\\fB{parent}\\fR(1)", text, f"{name}: SEE ALSO its parent")

    def test_pages_render(self):
        groff = shutil.which("groff")
        if groff is None:
            self.skipTest("groff is not installed (Debian's groff-base)")
        for words in self.commands:
            path = os.path.join(MAN_DIR, page_name(words))
            # Every warning but "can't break line" (a long value in an option's help).
            warnings = ["-w" + w for w in ("mac", "escape", "font", "char", "input", "syntax",
                                          "missing", "delim", "el")] + ["-Wbreak"]
            out = subprocess.run([groff, "-man", "-Tutf8", *warnings, path], capture_output=True,
                                 timeout=30)
            self.assertEqual(out.returncode, 0, path)
            self.assertEqual(out.stderr.decode(), "", f"{path}: groff warnings")
            rendered = re.sub(r".\x08", "", out.stdout.decode("utf-8"))  # overstrike
            self.assertIn("\nSYNOPSIS\n", rendered, path)
            self.assertIn(" ".join(("tessera",) + words), rendered, path)

    def test_man_shows_the_submit_page(self):
        man = shutil.which("man")
        if man is None:
            self.skipTest("man is not installed (Debian's man-db)")
        path = os.path.join(MAN_DIR, "tessera-submit.1.gz")
        env = dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="100", LANG="C.UTF-8")
        out = subprocess.run([man, "-l", path], capture_output=True, text=True, env=env, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        plain = re.sub(r".\x08", "", out.stdout)  # overstrike bold and underline
        self.assertIn("tessera-submit - Submit a job", plain)
        # Options are shown with ASCII hyphens, so that they can be copied.
        self.assertRegex(plain, r"-f, --file")
        self.assertIn("--idempotency-key", plain)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    TESSERA, MAN_DIR = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    unittest.main(argv=sys.argv[:1], verbosity=2)
