# SPDX-License-Identifier: MIT
"""Names for the frames a shim report leaves as bare addresses (one
written on a signal, by a process still running), by eu-addr2line, with
Boost's template arguments cut short."""
import re
import shutil
import subprocess


def untemplate(name):
    """Boost's template arguments run to a screenful: "f<a<b>, c>(x)" -> "f<>(x)"
    (but operator<, operator<<, ... keep their name)."""
    out, depth = [], 0
    for i, ch in enumerate(name):
        if ch == "<" and not name[:i].endswith(("operator", "operator<")):
            depth += 1
            if depth == 1:
                out.append("<>")
        elif ch == ">" and depth and not name[:i].endswith("operator-"):
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def symbolize_live(text, pid):
    """Names the frames a report written on a signal leaves as bare
    addresses ("#0 0x7f.. (?)"), with eu-addr2line on the live process."""
    tool = shutil.which("eu-addr2line")
    addrs = sorted(set(re.findall(r"#\d+ (0x[0-9a-f]+) \(\?\)", text)))
    if not tool or not addrs:
        return text
    try:
        r = subprocess.run([tool, f"--pid={pid}", "-a", "-f", "-C", "-S"] + addrs,
                           capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return text
    # -a: each answer starts with the address; a name, then source lines.
    names, at = {}, None
    for line in r.stdout.splitlines():
        if re.fullmatch(r"0x[0-9a-f]+", line):
            at = hex(int(line, 16))
        elif at:
            if not line.startswith(("??", "()")):
                line = untemplate(line)
                names[at] = line if len(line) <= 160 else line[:157] + "..."
            at = None
    return re.sub(r"#(\d+) (0x[0-9a-f]+) \(\?\)",
                  lambda m: f"#{m.group(1)} {m.group(2)} " + (names.get(m.group(2)) or "(?)"), text)
