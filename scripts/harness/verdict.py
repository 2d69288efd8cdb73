# SPDX-License-Identifier: MIT
"""Verdicts that noise cannot make (issues 39 and 46): pure functions, no
I/O, which tests/harness/verdict.sh and rounds.sh call on synthetic and
recorded numbers.

A comparison is a list of ratios paired within each round (the shim's run
over the other configuration's run of the same round, which ran back to
back with it, under the same load).  Its range is a distribution-free
confidence interval for the median of those ratios: the order statistics
k and n+1-k that cover the median with at least `coverage` (default 90%),
that is the minimum and maximum from 5 to 7 rounds, narrower from 8, so
that more rounds narrow it.  Fewer rounds than the smallest n whose
[min-max] reaches the coverage (5 at 90%: all of 5 rounds fall on one side
of the true median 1 time in 16) have no range, and decide nothing.

One rule, four answers:
  met        the whole range at or past the target;
  MISSED     the whole range short of it;
  at par     neither, and the whole range within `band` (default 5%) of
             1.0x: the two are the same within what can be told;
  undecided  too few rounds, or the range straddles the target and reaches
             outside the band: more rounds can decide it (rounds.py adds
             them for headline rows, within the time budget)."""
import math
import statistics

# The rule's two settings; scripts/demo's --coverage and --par-band set
# them once, before any verdict (read them as verdict.COVERAGE).
COVERAGE = 0.90
PAR_BAND = 0.05

MET, MISSED, AT_PAR, UNDECIDED = "met", "MISSED", "at par", "undecided"
STATES = (MET, MISSED, AT_PAR, UNDECIDED)


def paired(a_runs, b_runs, key="mib_s"):
    """a/b of runs paired by round ("repeat"), in round order; rounds where
    either is missing or zero are left out."""
    b_by = {r["repeat"]: r.get(key) for r in b_runs}
    out = []
    for r in sorted(a_runs, key=lambda r: r["repeat"]):
        a, b = r.get(key), b_by.get(r["repeat"])
        if a is not None and b:
            out.append(a / b)
    return out


def coverage(n, k):
    """P(X_(k) <= median <= X_(n+1-k)) for n draws of a continuous variable."""
    tail = sum(math.comb(n, i) for i in range(k)) / 2 ** n
    return 1 - 2 * tail


def min_rounds(cover=None):
    """The fewest rounds whose [min-max] covers the median with cover."""
    cover = COVERAGE if cover is None else cover
    n = 1
    while coverage(n, 1) < cover:
        n += 1
    return n


def ratio_range(ratios, cover=None):
    """(lo, hi) of the ratios: the narrowest pair of order statistics
    (k, n+1-k) that still covers the median with cover, i.e. [min, max] up
    to 7 rounds at 90%; [min, max] too when even that falls short of cover
    (see min_rounds); (None, None) without ratios."""
    cover = COVERAGE if cover is None else cover
    xs = sorted(ratios)
    n = len(xs)
    if not n:
        return None, None
    k = 1
    while k + 1 <= n // 2 and coverage(n, k + 1) >= cover:
        k += 1
    return xs[k - 1], xs[n - k]


def verdict(ratios, target, higher=True, band=None, cover=None):
    """The verdict on ratios against target (higher: the ratio should be at
    least target, else at most).  A dict: state (met, MISSED, at par,
    undecided), med, lo, hi, n, target, higher, band, reason (why
    undecided, or what at par means; else "")."""
    band = PAR_BAND if band is None else band
    cover = COVERAGE if cover is None else cover
    n = len(ratios)
    lo, hi = ratio_range(ratios, cover)
    v = {"state": UNDECIDED, "med": statistics.median(ratios) if n else None, "lo": lo, "hi": hi,
         "n": n, "target": target, "higher": higher, "band": band, "reason": ""}
    need = min_rounds(cover)
    if not n:
        v["reason"] = "not measured"
        return v
    if n < need:
        v["reason"] = f"{need} rounds make a {cover:.0%} range"
        return v
    good_side = lo >= target if higher else hi <= target
    bad_side = hi < target if higher else lo > target
    if good_side or bad_side:
        v["state"] = MET if good_side else MISSED
    elif 1 - band <= lo and hi <= 1 + band:
        v["state"] = AT_PAR
        v["reason"] = f"the range within {band:.0%} of 1x"
    else:
        v["reason"] = f"the range straddles {target:g}x"
    return v


def wants_more(v):
    """Whether another round could decide v: measured and undecided."""
    return v["state"] == UNDECIDED and v["n"] > 0


def describe(v, label):
    """One line: the state, the label, the target, the median ratio, its
    range and rounds, and the reason when it is undecided or at par."""
    cmp = ">=" if v["higher"] else "<="
    if v["med"] is None:
        return f"{v['state']:<9} {label} {cmp} {v['target']:g}x: {v['reason']}"
    line = (f"{v['state']:<9} {label} {cmp} {v['target']:g}x: {v['med']:.2f}x "
            f"[{v['lo']:.2f}-{v['hi']:.2f}], {v['n']} round{'' if v['n'] == 1 else 's'}")
    return line + (f": {v['reason']}" if v["reason"] else "")
