#!/bin/sh
# SPDX-License-Identifier: MIT
# The documents' links hold: every relative link of README.md and docs/
# (docs/history/ too) names a file of the tree, and every #anchor into a
# Markdown file names one of its headings (GitHub's slug: lower case,
# punctuation dropped, spaces made hyphens) or an explicit <a id="...">.
# docs/results.md was split into dated files (issue 46): a link into a
# section that moved fails here.  README.md stays a first page (issue 47:
# at most 200 lines; its details live in docs/).
. "$PS_TOP_SRCDIR/tests/lib.sh"
cd "$PS_TOP_SRCDIR" || exit 99
python3 - README.md docs >"$PST_TMP/out" <<'PY'
import os, re, sys

def files(args):
    for a in args:
        if os.path.isdir(a):
            for d, _, names in os.walk(a):
                for n in sorted(names):
                    if n.endswith(".md"):
                        yield os.path.join(d, n)
        else:
            yield a

def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")

def anchors(path, cache={}):
    if path not in cache:
        found, seen, fence = set(), {}, False
        for line in open(path, encoding="utf-8"):
            if re.match(r"^\s*```", line):
                fence = not fence
                continue
            if fence:
                continue
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(1))
                k = seen.get(base, 0)
                seen[base] = k + 1
                found.add(base if k == 0 else "%s-%d" % (base, k))
            found.update(re.findall(r'<a\s+(?:id|name)="([^"]+)"', line))
        cache[path] = found
    return cache[path]

bad = n = 0
for f in files(sys.argv[1:]):
    text = open(f, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        t = m.group(1)
        if re.match(r"[a-z]+:", t):
            continue
        n += 1
        target, _, frag = t.partition("#")
        path = os.path.normpath(os.path.join(os.path.dirname(f), target)) if target else f
        if not os.path.exists(path):
            print("%s: link to %s: no such file" % (f, t))
            bad += 1
        elif frag and path.endswith(".md") and frag not in anchors(path):
            print("%s: link to %s: no heading with that anchor in %s" % (f, t, path))
            bad += 1
print("links checked: %d, broken: %d" % (n, bad))
PY
sed -n '/: link to /p' "$PST_TMP/out"
if grep -q ': link to ' "$PST_TMP/out"; then
	fail "broken links ($(tail -1 "$PST_TMP/out"))"
else
	pass "$(tail -1 "$PST_TMP/out")"
fi
n=$(wc -l <"$PS_TOP_SRCDIR/README.md")
[ "$n" -le 200 ] && pass "README.md: $n lines" || fail "README.md: $n lines, over 200: move details to docs/"
finish
