#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The documentation's shell examples, run as tests (like Python's doctest).

Every shell example of README.md, docs/*.md and the manual pages is
extracted and run against the built tree: a Markdown block fenced as sh,
shell or bash, and a manual page's .EX/.EE or .nf/.fi block.  Each one runs
with /bin/sh -e, in a fresh temporary directory that holds demo/, scripts/,
man/ and ./storaged, ./s3proxy, ./loadgen as links into the tree, with the
built `poolshim` first on PATH and the demo stack up (its S3_ENDPOINT and
credentials in the environment).  It passes when it exits 0 within 60 s;
whatever it leaves running (a server started with &) is then stopped,
SIGTERM to its process group.  With STACK_DIR set (tests/docs/examples.sh
sets it), the stack is started there under the shim, and started again
before an example when an earlier one took it down.

A block that starts a process in the background (&) and waits for it in a
loop (until, while, for ... in $(seq ...)) must check in that loop that
the process still runs (kill -0), so that a server that died at start fails
the block at once; such a block without kill -0 fails, run or skipped.

Annotations, written in the document just before the block (an HTML comment
in Markdown, a roff comment in a manual page), say what is special:

  <!-- docs-test: skip REASON -->        not run (root, a cluster, Docker, ...)
  .\\" docs-test: skip REASON            the same in a manual page
  docs-test: setup COMMANDS              run first, unseen by the reader
                                          (files the example names)
  docs-test: replace OLD => NEW          OLD, which must be in the block, is
                                          run as NEW (a long duration made short)
  docs-test: server SECONDS              a program that runs until stopped:
                                          passes if it still runs after SECONDS
  docs-test: timeout SECONDS             the block may take this long, not 60 s
                                          (a cluster to bring up)
  docs-test: needs FEATURE               skipped until the tree has FEATURE
                                          (a probe below says), or while
                                          command:NAME is not installed
  docs-test: output-of COMMAND           the block is what COMMAND prints: it
                                          is run and its output must have the
                                          block's shape (below)

A Markdown block fenced without a shell language (a usage line, a report)
is text, not run, unless it carries output-of; in a manual page every
example block is a command unless annotated.  Shape: each line of the block that
is not "..." must match a line of the output, in order; in it a number
(with a unit or a decimal part) stands for any number, and "...", PORT,
PID and an all-capital placeholder after '=' stand for any text.

Usage: doctest.py [--list] [--only FILE[:LINE]] FILE ...
Environment: PS_TOP_SRCDIR, PS_TOP_BUILDDIR (make check sets them).
Exit status: 0 all run examples passed, 1 some failed.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SRC = os.environ.get("PS_TOP_SRCDIR", ".")
BUILD = os.environ.get("PS_TOP_BUILDDIR", ".")
SHELL_LANGS = {"sh", "shell", "bash"}
BLOCK_TIMEOUT = 60


class Block:
    def __init__(self, path, line, text, lang, notes):
        self.path, self.line, self.text, self.lang, self.notes = path, line, text, lang, notes

    def where(self):
        return f"{os.path.relpath(self.path, SRC)}:{self.line}"

    def note(self, key):
        return [v for k, v in self.notes if k == key]


NOTE_MD = re.compile(r"^\s*<!--\s*docs-test:\s*(\S+)\s*(.*?)\s*-->\s*$")
NOTE_ROFF = re.compile(r'^\.\\"\s*docs-test:\s*(\S+)\s*(.*?)\s*$')


def notes_above(lines, i, pattern, passable):
    """The annotations on the lines above line i (0-based), nearest last."""
    notes = []
    j = i - 1
    while j >= 0:
        m = pattern.match(lines[j])
        if m:
            notes.append((m.group(1), m.group(2)))
        elif not passable(lines[j]):
            break
        j -= 1
    return list(reversed(notes))


def markdown_blocks(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        i += 1
        body = []
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        notes = notes_above(lines, start, NOTE_MD, lambda s: not s.strip())
        blocks.append(Block(path, start + 1, "\n".join(body) + "\n", lang, notes))
    return blocks


def roff_text(s):
    """A roff example line as the reader sees it."""
    s = re.sub(r"\\f[BIRP]|\\f\(..|\\f\[[^]]*\]", "", s)
    for a, b in ((r"\(aq", "'"), (r"\(dq", '"'), (r"\(ga", "`"), (r"\(ti", "~"),
                 (r"\(ha", "^"), (r"\-", "-"), (r"\&", ""), (r"\e", "\\"), (r"\ ", " "),
                 (r"\(em", "--"), (r"\(en", "-"), (r"\(bu", "*")):
        s = s.replace(a, b)
    return s


def roff_blocks(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    passable = re.compile(r"^(\.in\b.*|\.PP|\.P|\.LP|\.sp\b.*|\s*)$")
    while i < len(lines):
        if lines[i] not in (".EX", ".nf"):
            i += 1
            continue
        end = ".EE" if lines[i] == ".EX" else ".fi"
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i] != end:
            if not lines[i].startswith('.\\"'):
                body.append(roff_text(lines[i]))
            i += 1
        i += 1
        notes = notes_above(lines, start, NOTE_ROFF, lambda s: bool(passable.match(s)))
        # In a manual page every example block is a command unless said otherwise.
        blocks.append(Block(path, start + 1, "\n".join(body) + "\n", "sh", notes))
    return blocks


def blocks_of(path):
    return markdown_blocks(path) if path.endswith(".md") else roff_blocks(path)


# ---- shapes ---------------------------------------------------------------

NUM = r"-?[0-9][0-9.,]*(?:[KMGTP]i?B?|[kmunµ]?s|%|x)?"


def shape_regex(line):
    out, pos = [], 0
    token = re.compile(r"\.\.\.|\b(?:PID|PORT)\b|=[A-Z][A-Z_]*\b|\bx[0-9][0-9.,]*\b|-?\b[0-9][0-9.,]*(?:[KMGTP]i?B?|[kmunµ]?s|%|x)?\b|\s+")
    for m in token.finditer(line):
        out.append(re.escape(line[pos:m.start()]))
        t = m.group(0)
        if t == "...":
            out.append(".*")
        elif t in ("PID", "PORT"):
            out.append(r"\S+")
        elif t.startswith("="):
            out.append(r"=\S*")
        elif t.startswith("x"):
            out.append("x" + NUM)     # a ratio: x1.39
        elif t.isspace():
            out.append(r"\s+")
        else:
            out.append(NUM)
        pos = m.end()
    out.append(re.escape(line[pos:]))
    return re.compile("^\\s*" + "".join(out) + "\\s*$")


def shape_mismatch(expected, actual):
    """None when actual has expected's shape, else the first line not found."""
    got = actual.split("\n")
    k = 0
    for line in expected.split("\n"):
        if not line.strip() or line.strip() == "...":
            continue
        rx = shape_regex(line.rstrip())
        while k < len(got) and not rx.match(got[k]):
            k += 1
        if k == len(got):
            return line
        k += 1
    return None


# ---- features an example may need -----------------------------------------

def probe_sigterm_report(env):
    """A program ended by SIGTERM at its default disposition writes its report."""
    d = tempfile.mkdtemp(prefix="psdoc-probe.")
    try:
        p = subprocess.Popen(["poolshim", "POOLSHIM_STATS=" + d + "/r.json", "--", "sleep", "30"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=10)
        return os.path.exists(d + "/r.json")
    finally:
        shutil.rmtree(d, ignore_errors=True)


FEATURES = {
    "sigterm-report": probe_sigterm_report,
}


# ---- waiting for a server -------------------------------------------------

BACKGROUND = re.compile(r"(?<![&>|])&(?![&>])")
WAIT_LOOP = re.compile(r"\b(?:until|while)\b|\bfor\s+\w+\s+in\s+\$\(seq\b")


def unguarded_wait(script):
    """True when the script starts a process in the background and waits for
    it in a loop (to listen, to answer) without asking in the loop whether
    it still runs (kill -0): a server that died at start would leave such a
    loop spinning until the block's timeout, or reaching whatever else holds
    the port."""
    return (bool(BACKGROUND.search(script)) and bool(WAIT_LOOP.search(script))
            and "kill -0" not in script)


# ---- running --------------------------------------------------------------

def workdir(root):
    d = tempfile.mkdtemp(prefix="ex.", dir=root)
    for name, target in (("demo", os.path.join(BUILD, "demo")),
                         ("scripts", os.path.join(SRC, "scripts")),
                         ("man", os.path.join(SRC, "man")),
                         ("storaged", os.path.join(BUILD, "demo", "storaged")),
                         ("s3proxy", os.path.join(BUILD, "demo", "s3proxy")),
                         ("loadgen", os.path.join(BUILD, "demo", "loadgen"))):
        os.symlink(target, os.path.join(d, name))
    return d


def kill_group(p):
    """SIGTERM to the example's process group, SIGKILL to what is left after 5 s."""
    try:
        os.killpg(p.pid, signal.SIGTERM)
        for _ in range(50):
            p.poll()
            os.killpg(p.pid, 0)
            time.sleep(0.1)
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_script(script, cwd, env, timeout, server=None):
    """Exit status, output and why it failed (None) of script run in cwd.
    The output goes to a file, not a pipe: a server the example leaves in
    the background (with &) keeps a pipe open after the shell is done."""
    outpath = os.path.join(cwd, ".docs-test.out")
    with open(outpath, "wb") as out:
        p = subprocess.Popen(["/bin/sh", "-ec", script], cwd=cwd, env=env,
                             stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
    why = None
    try:
        p.wait(timeout=server if server is not None else timeout)
        if server is not None:
            why = "exited before %gs" % server
    except subprocess.TimeoutExpired:
        if server is None:
            why = "still running after %ds" % timeout
    # What the example left running (a server started with &, or the server).
    kill_group(p)
    p.wait()
    with open(outpath, "rb") as f:
        text = f.read().decode(errors="replace")
    rc = 0 if server is not None and why is None else p.returncode
    if why and rc == 0:
        rc = 1
    return rc, text, why


def ensure_stack(env):
    """The demo stack up (again, after an example's `scripts/stack down`),
    in a session of its own so that no example's clean-up ends it; its
    export line into env."""
    stack = os.path.join(SRC, "scripts", "stack")
    if subprocess.run([stack, "status"], env=env, stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        p = subprocess.run([stack, "up", "--shim"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
        if p.returncode != 0:
            raise SystemExit("doctest: scripts/stack up --shim failed: " + p.stderr)
    with open(os.path.join(env["STACK_DIR"], "env")) as f:
        for word in f.read().split():
            name, eq, value = word.partition("=")
            if eq:
                env[name] = value


def main(argv):
    list_only = "--list" in argv
    only = None
    args = []
    it = iter(argv)
    for a in it:
        if a == "--list":
            continue
        if a == "--only":
            only = next(it)
        else:
            args.append(a)
    env = dict(os.environ)
    root = tempfile.mkdtemp(prefix="psdoc.")
    failed = ran = skipped = 0
    feature_cache = {}
    try:
        for path in args:
            for b in blocks_of(path):
                out_of = b.note("output-of")
                if b.lang not in SHELL_LANGS and not out_of:
                    continue
                if only and not (b.where() == only or os.path.relpath(b.path, SRC) == only):
                    continue
                skip = b.note("skip")
                for f in b.note("needs"):
                    if f.startswith("command:"):
                        if not shutil.which(f[8:], path=env.get("PATH")):
                            skip = [f"needs {f[8:]}, which is not installed"]
                        continue
                    if f not in FEATURES:
                        print(f"FAIL: {b.where()}: unknown feature '{f}' in docs-test: needs")
                        failed += 1
                        skip = ["(error)"]
                        break
                    if f not in feature_cache:
                        feature_cache[f] = FEATURES[f](env)
                    if not feature_cache[f]:
                        skip = [f"needs {f}, which this tree does not have yet"]
                # Every block that could run, skipped here or not.
                if unguarded_wait(out_of[0] if out_of else b.text):
                    print(f"FAIL: {b.where()}: waits in a loop for a process it started in the "
                          "background without checking that it still runs (kill -0)")
                    failed += 1
                    continue
                if list_only:
                    print(f"{b.where()}: {'skip ' + skip[0] if skip else 'run'}")
                    continue
                if skip:
                    print(f"SKIP: {b.where()}: {skip[0]}")
                    skipped += 1
                    continue
                script = b.text
                bad = None
                for r in b.note("replace"):
                    old, sep, new = r.partition(" => ")
                    if not sep or old not in script:
                        bad = f"docs-test: replace '{old}' is not in the block"
                        break
                    script = script.replace(old, new)
                if out_of:
                    script = out_of[0] + "\n"
                setup = "\n".join(b.note("setup"))
                server = b.note("server")
                if "STACK_DIR" in env:
                    ensure_stack(env)
                cwd = workdir(root)
                ran += 1
                t0 = time.monotonic()
                rc, out, why = (1, "", bad) if bad else run_script(
                    (setup + "\n" if setup else "") + script, cwd, env,
                    float(b.note("timeout")[0]) if b.note("timeout") else BLOCK_TIMEOUT,
                    float(server[0]) if server else None)
                dt = time.monotonic() - t0
                if why is None and rc == 0 and out_of:
                    miss = shape_mismatch(b.text, out)
                    if miss is not None:
                        why = f"output lacks a line shaped like: {miss.strip()}"
                if why is None and rc != 0:
                    why = f"exit status {rc}"
                if why:
                    failed += 1
                    print(f"FAIL: {b.where()}: {why}")
                    print("  the example:")
                    for line in (script if not out_of else out_of[0]).rstrip().split("\n"):
                        print("    " + line)
                    print("  its output (last 20 lines):")
                    for line in out.rstrip().split("\n")[-20:]:
                        print("    | " + line)
                else:
                    print(f"ok: {b.where()} ({dt:.1f}s)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if not list_only:
        print(f"{ran} examples run, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
