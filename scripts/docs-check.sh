#!/usr/bin/env bash
# Checks the documentation: the site of docs/ builds with `mkdocs build --strict` (a
# broken link or nav entry fails it), every link's #anchor exists (mkdocs 1.4 checks
# pages, not anchors), README.md's links land, README.md stays short, and nothing points
# outside the repository.
#
# Usage: scripts/docs-check.sh          (from anywhere; needs Debian's mkdocs)
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "docs-check: FAILED: $*" >&2
  exit 1
}

command -v mkdocs >/dev/null 2>&1 ||
  fail "mkdocs is missing: install Debian's mkdocs (apt-get install mkdocs, or scripts/setup.sh)"
command -v python3 >/dev/null 2>&1 || fail "python3 is missing"

# The README is the front door; the reference lives in docs/.
readme_limit=15000
readme_bytes=$(wc -c <README.md)
if ((readme_bytes >= readme_limit)); then
  fail "README.md is $readme_bytes bytes; keep it under $readme_limit (move the detail into docs/)"
fi

# The repository must stand on its own.
if grep -rn --fixed-strings '../shared' README.md mkdocs.yml docs/; then
  fail "the lines above point outside the repository (../shared)"
fi

site="$(mktemp -d "${TMPDIR:-/tmp}/tessera-docs.XXXXXX")"
trap 'rm -rf "$site"' EXIT
if ! log=$(mkdocs build --strict --site-dir "$site/site" 2>&1); then
  echo "$log" >&2
  fail "mkdocs build --strict"
fi
echo "$log" | grep -v '^INFO' || true

python3 - "$site/site" <<'EOF'
# Every relative link of the built site, and every link of README.md, must land on a
# file that exists and, when it names one, on an id of that page.
import html.parser
import os
import re
import sys
import urllib.parse

site = sys.argv[1]


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.hrefs = set(), []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            elif name in ("href", "src") and value:
                self.hrefs.append(value)


pages = {}
for root, _, files in os.walk(site):
    for f in files:
        if f.endswith(".html"):
            path = os.path.join(root, f)
            p = Page()
            with open(path, encoding="utf-8") as fh:
                p.feed(fh.read())
            pages[os.path.normpath(path)] = p


def resolve(base_dir, target):
    """The file a relative URL names, and its fragment."""
    url = urllib.parse.urlsplit(target)
    path = urllib.parse.unquote(url.path)
    full = os.path.normpath(os.path.join(base_dir, path)) if path else None
    if full is not None and (path.endswith("/") or os.path.isdir(full)):
        full = os.path.join(full, "index.html")
    return full, urllib.parse.unquote(url.fragment)


errors = []
for path, page in sorted(pages.items()):
    shown = os.path.relpath(path, site)
    for href in page.hrefs:
        if re.match(r"^[a-z][a-z0-9+.-]*:|^/", href):
            continue  # external, mailto:, data:, or from the server's root (404.html)
        full, frag = resolve(os.path.dirname(path), href)
        full = full or path
        if not os.path.exists(full):
            errors.append(f"{shown}: {href}: no such file in the site")
        elif frag and full in pages and frag not in pages[full].ids:
            errors.append(f"{shown}: {href}: no anchor '{frag}'")


def github_slugs(markdown):
    """The anchors GitHub gives README.md's headings."""
    slugs, seen, fenced = set(), {}, False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"^#{1,6} +(.*?) *#*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).replace("`", "").lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            slugs.add(slug if n == 0 else f"{slug}-{n}")
    return slugs


with open("README.md", encoding="utf-8") as fh:
    readme = fh.read()
readme_slugs = github_slugs(readme)
for target in re.findall(r"\]\(([^)\s]+)\)", readme):
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
        continue
    path, _, frag = target.partition("#")
    if not path:
        if frag not in readme_slugs:
            errors.append(f"README.md: {target}: no heading with that anchor")
        continue
    if not os.path.exists(path):
        errors.append(f"README.md: {target}: no such file")
        continue
    if frag and path.startswith("docs/") and path.endswith(".md"):
        rel = path[len("docs/"):-len(".md")]
        html_path = "index.html" if rel == "index" else os.path.join(rel, "index.html")
        html_path = os.path.join(site, html_path)
        if rel.endswith("/index"):
            html_path = os.path.join(site, rel[: -len("index")], "index.html")
        page = pages.get(os.path.normpath(html_path))
        if page is None or frag not in page.ids:
            errors.append(f"README.md: {target}: no anchor '{frag}' in the built page")

for e in errors:
    print("docs-check:", e, file=sys.stderr)
if errors:
    sys.exit(1)
print(f"docs-check: {len(pages)} pages, every link and anchor lands")
EOF
echo "docs-check: ok (README.md $readme_bytes bytes)"
