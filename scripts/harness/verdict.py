# SPDX-License-Identifier: MIT
"""Verdicts that noise cannot make (issue 39): pure functions, no I/O,
which tests/harness/verdict.sh calls on recorded numbers.

A comparison is a list of ratios paired within each round (the shim's run
over the other configuration's run of the same round, which ran minutes
apart at most, under the same load).  Its range is a distribution-free
confidence interval for the median ratio, order statistics k and n+1-k
with at least 90% coverage: the minimum and maximum up to seven rounds,
narrower from eight, so that more rounds can decide what three could not.
The verdict is "met" only when the whole range is on the right side of the
target, "MISSED" only when the whole range is on the wrong side, and
otherwise "not shown", with the reason; fewer than MIN_ROUNDS rounds show
no spread and decide nothing.  Below SURE_ROUNDS rounds a range on one side
decides only when the target is at least twice as far from the median as
the round nearest the target is (the noise seen on that side would have
to double to reach it), and never for a strict comparison (no harm, p99):
three rounds fall on the same side of their true median one time in
four, and on a shared machine they did (a PUT 4 KiB run read 0.73x
[0.72-0.88] in three rounds and 1.07x [0.58-2.31] in five, minutes later)."""
import math
import statistics

MIN_ROUNDS = 3
SURE_ROUNDS = 5
COVERAGE = 0.90
# More rounds are worth running for an undecided comparison only when its
# median is at least this far (relative) from the target: closer than that
# it is at par, and no number of rounds on a shared machine will tell.
MARGIN = 0.05

MET, MISSED, NOT_SHOWN = "met", "MISSED", "not shown"


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


def ratio_range(ratios):
    """(lo, hi) of the ratios: the widest-needed pair of order statistics
    that still covers the median with COVERAGE, i.e. [min, max] for n <= 7."""
    xs = sorted(ratios)
    n = len(xs)
    if not n:
        return None, None
    k = 1
    while k + 1 <= n // 2 and coverage(n, k + 1) >= COVERAGE:
        k += 1
    return xs[k - 1], xs[n - k]


def verdict(ratios, target, higher=True, strict=False):
    """The verdict on ratios against target (higher: the ratio should be at
    least target, else at most; strict: no decision under SURE_ROUNDS
    rounds, for comparisons expected at par, such as no-harm targets and
    p99s, which are the maxima of a few dozen requests).  A dict: state
    (met, MISSED, not shown), med, lo, hi, n, target, higher, reason (why
    not shown, else "")."""
    n = len(ratios)
    lo, hi = ratio_range(ratios)
    v = {"state": NOT_SHOWN, "med": statistics.median(ratios) if n else None, "lo": lo, "hi": hi,
         "n": n, "target": target, "higher": higher, "reason": ""}
    if n < MIN_ROUNDS:
        v["reason"] = f"a range needs at least {MIN_ROUNDS} rounds" if n else "not measured"
        return v
    good_side = lo >= target if higher else hi <= target
    bad_side = hi < target if higher else lo > target
    if good_side or bad_side:
        # The noise seen between the median and the round nearest the
        # target would have to double to reach the target.
        near = lo if abs(lo - target) < abs(hi - target) else hi
        clear = abs(v["med"] - target) >= 2 * abs(v["med"] - near)
        if n >= SURE_ROUNDS or (clear and not strict):
            v["state"] = MET if good_side else MISSED
        else:
            v["reason"] = (f"{'past' if good_side else 'short of'} {target:g}x in all {n} rounds, but "
                           + ("" if strict else "not by twice the spread on that side; ")
                           + f"{SURE_ROUNDS} rounds would decide")
    else:
        at_par = abs(v["med"] - target) < MARGIN * target
        v["reason"] = (f"the range straddles {target:g}x" + (" (at par within the noise)" if at_par else ""))
    return v


def wants_more(v):
    """Whether more rounds could decide v: not shown although measured, and
    either on one side in fewer than SURE_ROUNDS rounds, or its spread
    wider than its median's distance from the target and that distance
    above MARGIN."""
    if v["state"] != NOT_SHOWN or v["n"] < MIN_ROUNDS:
        return False
    lo, hi, t = v["lo"], v["hi"], v["target"]
    if (lo >= t or hi < t) if v["higher"] else (hi <= t or lo > t):
        return v["n"] < SURE_ROUNDS
    dist = abs(v["med"] - v["target"])
    return dist >= MARGIN * v["target"] and (v["hi"] - v["lo"]) > dist


def describe(v, label):
    """One line: the state, the label, the target, the median ratio, its
    range and rounds, and the reason when it is not shown."""
    cmp = ">=" if v["higher"] else "<="
    if v["med"] is None:
        return f"{v['state']:<9} {label} {cmp} {v['target']:g}x: {v['reason']}"
    line = (f"{v['state']:<9} {label} {cmp} {v['target']:g}x: {v['med']:.2f}x "
            f"[{v['lo']:.2f}-{v['hi']:.2f}], {v['n']} round{'' if v['n'] == 1 else 's'}")
    return line + (f": {v['reason']}" if v["reason"] else "")
