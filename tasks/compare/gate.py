"""The CI gate of ``benchcert compare``: exit 4 when the comparison says a candidate got worse.

    benchcert compare --baseline M CAND ... --db F --benchmark B --fail-on regressed [--margin D]

Without ``--margin``: the gate fails when a candidate's verdict is ``regressed`` (with several
candidates, the family verdict, decided by the Bonferroni simultaneous interval), i.e. it is significantly worse than the baseline
at level alpha.

With ``--margin D`` (a non-inferiority question, D in accuracy units, e.g. 0.02 = 2 points):
the gate fails only when the candidate is worse by more than D with confidence, i.e. the upper
end of the gap's interval (candidate - baseline) lies below -D.  The interval is the
comparison's primary 1 - alpha interval, and with several candidates its Bonferroni
simultaneous interval, so the family of gate decisions holds at level alpha together.  A
candidate whose interval reaches above -D passes: the data do not show a loss larger than D.

The gate reads only the verdict and interval the comparison reports; how they are computed is
stats/comparisons.py's business.
"""

from __future__ import annotations

import sys

from benchcert.flows.cli.errors import EXIT_GATE

FAIL_ON = ("regressed",)


def add_arguments(sp) -> None:
    sp.add_argument("--fail-on", choices=FAIL_ON, default=None, dest="fail_on",
                    help=f"CI gate: exit {EXIT_GATE} (and print the reason) when a candidate regressed against "
                         "the baseline; see --margin")
    sp.add_argument("--margin", type=float, default=None, metavar="D",
                    help="with --fail-on: fail only when a candidate is worse than the baseline by more than D "
                         "(accuracy units, e.g. 0.02) with confidence: the upper end of its interval is below -D")


def check_arguments(args) -> str | None:
    """A usage problem with the gate's options, or None."""
    margin = getattr(args, "margin", None)
    if margin is not None:
        if getattr(args, "fail_on", None) is None:
            return "--margin needs --fail-on regressed"
        if not 0 <= margin < 1:
            return f"--margin must be in [0, 1) (accuracy units: 0.02 = 2 points); got {margin}"
    return None


def decide(args, rows: list[dict], alpha: float) -> dict | None:
    """The gate's decision over the comparison rows (None when no gate was asked for).

    Each row needs ``candidate``, ``baseline``, ``verdict``, ``gap`` and ``interval`` (lower,
    upper); ``simultaneous_interval`` is used instead of ``interval`` when present.
    """
    if getattr(args, "fail_on", None) is None:
        return None
    margin = args.margin
    failed, undecided = [], []
    for row in rows:
        iv = row.get("simultaneous_interval") or row["interval"]
        if iv.get("lower") is None or iv.get("upper") is None:
            undecided.append(row["candidate"])  # no interval (too few shared items or subjects)
        if margin is None:
            bad = row["verdict"] == "regressed"
            why = "regressed (verdict)"
        else:
            upper = iv.get("upper")
            bad = upper is not None and upper < -margin
            why = f"worse by more than the {100 * margin:g} pp margin"
        if bad:
            failed.append({"candidate": row["candidate"], "baseline": row["baseline"], "reason": why,
                           "gap": row.get("gap"), "lower": iv.get("lower"), "upper": iv.get("upper"),
                           "interval_method": iv.get("method", row.get("method"))})
    level = f"{100 * (1 - alpha):g}%"
    if failed:
        f = failed[0]
        more = f" (and {len(failed) - 1} more candidate(s))" if len(failed) > 1 else ""
        reason = (f"gate failed: {f['candidate']!r} is {f['reason']} against {f['baseline']!r}: gap "
                  f"{_pp(f['gap'])} pp, {level} interval [{_pp(f['lower'])}, {_pp(f['upper'])}] pp{more}")
    else:
        rule = ("no candidate regressed" if margin is None else
                f"no candidate is worse by more than {100 * margin:g} pp with confidence")
        if undecided:  # passing is not evidence here: say that these were not decided at all
            rule += (f"; not decided, no interval (too few shared items or subjects): "
                     f"{', '.join(repr(c) for c in undecided)}")
        reason = f"gate passed: {rule} ({len(rows)} candidate(s), {level})"
    return {"fail_on": args.fail_on, "margin": margin, "passed": not failed, "failed": failed,
            "undecided": undecided,
            "reason": reason, "exit_code": EXIT_GATE if failed else 0}


def _pp(x) -> str:
    return "nan" if x is None else f"{100 * x:.2f}"


def finish(decision: dict | None, code: int = 0) -> int:
    """Print the gate's one-line reason (stderr) and return the command's exit code."""
    if decision is None or code != 0:
        return code
    print(decision["reason"], file=sys.stderr)
    return decision["exit_code"]
