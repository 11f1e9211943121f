"""The CI gate of ``benchcert compare``: does the comparison say a candidate got worse?

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
stats/comparisons.py's business.  It returns a :class:`GateDecision`; the command line turns a
failed gate into its exit code (4, flows/cli/errors.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from benchcert.tasks.errors import UsageError

FAIL_ON = ("regressed",)


@dataclass(frozen=True)
class GateOptions:
    """What the gate is asked: fail on ``fail_on`` (None: no gate), beyond ``margin`` if given."""

    fail_on: str | None = None
    margin: float | None = None


def check_options(options: GateOptions) -> None:
    """Raise :class:`UsageError` when the gate's options contradict each other or are out of range."""
    if options.margin is not None:
        if options.fail_on is None:
            raise UsageError("--margin needs --fail-on regressed")
        if not 0 <= options.margin < 1:
            raise UsageError(f"--margin must be in [0, 1) (accuracy units: 0.02 = 2 points); got {options.margin}")


@dataclass(frozen=True)
class GateDecision:
    """The gate's decision over a comparison's rows.

    Attributes
    ----------
    fail_on, margin
        The question asked (:class:`GateOptions`).
    passed : bool
        No candidate failed.
    failed : tuple of dict
        One entry per failed candidate: candidate, baseline, reason, gap, lower, upper, interval_method.
    undecided : tuple of str
        Candidates without an interval (too few shared items or subjects): not decided at all.
    reason : str
        The one-line reason, naming the first failure or the rule that passed.
    """

    fail_on: str
    margin: float | None
    passed: bool
    failed: tuple[dict, ...]
    undecided: tuple[str, ...]
    reason: str

    def as_dict(self) -> dict:
        return {"fail_on": self.fail_on, "margin": self.margin, "passed": self.passed,
                "failed": [dict(f) for f in self.failed], "undecided": list(self.undecided), "reason": self.reason}


def decide(rows: list[dict], alpha: float, options: GateOptions | None) -> GateDecision | None:
    """The gate's decision over the comparison rows (None when no gate was asked for).

    Each row needs ``candidate``, ``baseline``, ``verdict``, ``gap`` and ``interval`` (lower,
    upper); ``simultaneous_interval`` is used instead of ``interval`` when present.
    """
    if options is None or options.fail_on is None:
        return None
    margin = options.margin
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
    return GateDecision(fail_on=options.fail_on, margin=margin, passed=not failed, failed=tuple(failed),
                        undecided=tuple(undecided), reason=reason)


def _pp(x) -> str:
    return "nan" if x is None else f"{100 * x:.2f}"
