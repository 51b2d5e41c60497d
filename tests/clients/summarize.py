"""Reduce the peers' test runs recorded by clients_record.py to a compact summary.

usage: python summarize.py WORKDIR SUITE...

For each SUITE it reads WORKDIR/SUITE-baseline.jsonl and WORKDIR/SUITE-tether.jsonl
(one line per test phase), WORKDIR/SUITE-tether-stats/stats-*.json (the tether
plugin's statistics) and WORKDIR/SUITE-MODE.meta (``seconds rc`` of the pytest
run), and prints: the counts per suite and mode, the routing proof, and every
test whose outcome differs between baseline and tether (tests that only one run
reached, because a timeout stopped the other, are counted apart, not listed as
differences). Exits 1 (the verdict line says why) when a pytest run ended with a
status that is no test outcome (0, 1, or 124 for the timeout), when a test that
passes in the baseline fails or errors through tether, or when a tether run
allocated nothing through tether.
"""

from __future__ import annotations

import glob
import json
import os
import sys

OUTCOMES = ("passed", "failed", "skipped", "error", "xfailed", "xpassed")


def outcomes(path: str) -> tuple[dict[str, str], dict[str, str]]:
    """nodeid -> final outcome, and nodeid -> the failure's last line."""
    phases: dict[str, dict[str, dict]] = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue                  # a line cut by a kill
                phases.setdefault(r["id"], {})[r["when"]] = r
    final, why = {}, {}
    for nid, ph in phases.items():
        bad = [w for w in ("setup", "call", "teardown") if w in ph and ph[w]["outcome"] == "failed"]
        if bad:
            final[nid] = "failed" if bad[0] == "call" else "error"
            why[nid] = ph[bad[0]].get("why", "")
        elif "call" in ph:
            c = ph["call"]
            if c.get("xfail"):
                final[nid] = "xfailed" if c["outcome"] == "skipped" else "xpassed"
            else:
                final[nid] = c["outcome"]
        elif "setup" in ph:
            final[nid] = "skipped" if ph["setup"]["outcome"] == "skipped" else "error"
    return final, why


def meta(path: str) -> str:
    try:
        with open(path) as f:
            seconds, rc = f.read().split()[:2]
    except (OSError, ValueError):
        return "not run"
    note = {"0": "", "1": "", "124": " TIMEOUT", "130": " TIMEOUT", "2": " interrupted", "5": " no tests"}.get(rc, "")
    return f"{seconds}s rc={rc}{note}"


def run_rc(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().split()[1]
    except (OSError, ValueError, IndexError):
        return None


def stats_totals(d: str) -> dict | None:
    rows = []
    for p in sorted(glob.glob(os.path.join(d, "stats-*.json"))):
        with open(p) as f:
            rows.append(json.load(f))
    return {k: sum(r[k] for r in rows) for k in ("tests", "tests_routed", "total_count")} if rows else None


def stats_line(d: str) -> str:
    rows = []
    for p in sorted(glob.glob(os.path.join(d, "stats-*.json"))):
        with open(p) as f:
            rows.append(json.load(f))
    if not rows:
        return "no tether statistics written"
    s = {k: sum(r[k] for r in rows) for k in ("tests", "tests_routed", "total_count", "total_bytes",
                                               "current_count", "current_bytes")}
    return (f"{s['total_count']} allocations, {s['total_bytes'] / 2**20:.1f} MiB through the StatisticsAdaptor "
            f"({len(rows)} process(es)); {s['tests_routed']} of {s['tests']} tests allocated through it; "
            f"held at the end: {s['current_count']} ({s['current_bytes']} bytes)")


def summarize(work: str, suites: list[str], limit: int = 40) -> tuple[list[str], list[str]]:
    """The summary's lines, and the problems (empty: the verdict is ok)."""
    problems: list[str] = []
    out = [f"{'suite':6} {'mode':9} " + " ".join(f"{o:>8}" for o in OUTCOMES) + f" {'total':>7}  run"]
    diffs = []
    for suite in suites:
        runs = {}
        for mode in ("baseline", "tether"):
            final, why = outcomes(os.path.join(work, f"{suite}-{mode}.jsonl"))
            runs[mode] = (final, why)
            counts = [sum(1 for v in final.values() if v == o) for o in OUTCOMES]
            out.append(f"{suite:6} {mode:9} " + " ".join(f"{c:>8}" for c in counts) + f" {len(final):>7}  "
                       + meta(os.path.join(work, f"{suite}-{mode}.meta")))
        out.append(f"{suite:6} routing   " + stats_line(os.path.join(work, f"{suite}-tether-stats")))
        for mode in ("baseline", "tether"):
            rc = run_rc(os.path.join(work, f"{suite}-{mode}.meta"))
            if rc not in ("0", "1", "124"):
                problems.append(f"{suite} {mode}: pytest exit {rc} (not a test outcome: see {suite}-{mode}.log)")
        tot = stats_totals(os.path.join(work, f"{suite}-tether-stats"))
        if runs["tether"][0] and (tot is None or tot["total_count"] == 0):
            problems.append(f"{suite}: the tether run allocated nothing through tether")
        (b, _), (t, twhy) = runs["baseline"], runs["tether"]
        both = sorted(set(b) & set(t))
        changed = [n for n in both if b[n] != t[n]]
        only_b, only_t = len(set(b) - set(t)), len(set(t) - set(b))
        head = f"{suite}: {len(changed)} test(s) differ baseline -> tether (of {len(both)} run in both)"
        if only_b or only_t:
            head += f"; reached by one run only: {only_b} baseline, {only_t} tether"
        diffs.append(head)
        worse = [n for n in changed if b[n] in ("passed", "xfailed") and t[n] in ("failed", "error")]
        if worse:
            problems.append(f"{suite}: {len(worse)} test(s) that pass in the baseline fail through tether")
        for n in changed[:limit]:
            reason = f"  [{twhy[n]}]" if n in twhy and twhy[n] else ""
            diffs.append(f"  {n}: {b[n]} -> {t[n]}{reason}")
        if len(changed) > limit:
            diffs.append(f"  ... and {len(changed) - limit} more (see the .jsonl files)")
    verdict = "verdict: ok" if not problems else "verdict: FAILED: " + "; ".join(problems)
    return out + diffs + [verdict], problems


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    lines, problems = summarize(argv[0], argv[1:])
    print("\n".join(lines))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
