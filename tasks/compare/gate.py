"""The CI gate of ``benchcert compare``: fail a checkpoint, or pass it only on evidence.

    benchcert compare --baseline M CAND ... --db F --benchmark B --fail-on regressed
    benchcert compare --baseline M CAND ... --db F --benchmark B --require non-inferior --margin D
    benchcert compare --baseline M CAND ... --db F --benchmark B --require equivalent --margin D

Three questions, each decided on the interval of the gap (candidate - baseline) that the
comparison prints (its primary 1 - alpha interval; with several candidates the Bonferroni
simultaneous interval, so the family of decisions holds together; under ``--record`` the
anytime-valid interval, so asking after every checkpoint does not inflate the error rate):

* ``--fail-on regressed`` (did it get worse?): fails when a candidate's verdict is
  ``regressed``, i.e. it is significantly worse than the baseline at level alpha. A candidate
  the data cannot tell from the baseline passes: passing is not evidence of anything.
* ``--require non-inferior --margin D`` (is it shown to be no worse than D?): passes only when
  the interval's lower end lies above -D (D in accuracy units, 0.01 = 1 point). With the
  two-sided 1 - alpha interval this is the one-sided non-inferiority test at level alpha/2
  (the usual convention of a two-sided 95% interval for non-inferiority). A candidate without an
  interval fails: nothing was shown.
* ``--require equivalent --margin D`` (is it shown to be within D either way?): passes only when
  the whole interval lies inside (-D, D): two one-sided tests (Schuirmann 1987), each at level
  alpha/2 with the 1 - alpha interval (the classical TOST at level alpha reads the 1 - 2 alpha
  interval: ask for it with ``--alpha`` twice as large).

Whatever the question, a gate never passes a candidate whose verdict is ``regressed``: a
significant loss smaller than the margin still fails (the table beside the gate says
regressed). ``--fail-on regressed --margin D`` used to pass a candidate unless its loss was
shown to exceed D, which let through a candidate whose table said regressed and whose loss
could be far larger than D (an interval of [-2.24, +1.49] pp passed a 1-point margin); it is
refused with a pointer to ``--require non-inferior``.

The gate reads only the verdict and interval the comparison reports; how they are computed is
stats/comparisons' business.  It returns a frozen :class:`GateDecision`; the command line turns a
failed gate into its exit code (4, flows/cli/errors.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from benchcert.tasks.compare.rows import deciding_interval
from benchcert.tasks.errors import UsageError

FAIL_ON = ("regressed",)
#: What ``--require`` can ask the data to show.
REQUIRE = ("non-inferior", "equivalent")


@dataclass(frozen=True)
class GateOptions:
    """What the gate is asked: fail on ``fail_on``, and/or require ``require`` within ``margin``
    (None everywhere: no gate)."""

    fail_on: str | None = None
    margin: float | None = None
    require: str | None = None


def check_options(options: GateOptions) -> None:
    """Raise :class:`UsageError` when the gate's options contradict each other or are out of range."""
    if options.require is not None and options.require not in REQUIRE:
        raise UsageError(f"--require must be one of {list(REQUIRE)}; got {options.require!r}")
    if options.margin is None:
        if options.require is not None:
            raise UsageError(f"--require {options.require} needs --margin D (accuracy units: 0.01 = 1 point)")
        return
    if options.require is None:
        if options.fail_on is not None:
            raise UsageError("--fail-on regressed --margin D is no longer accepted: it passed candidates whose "
                             "loss could exceed D (and whose table said regressed). Use --require non-inferior "
                             "--margin D to pass only when the data show the loss is smaller than D, or "
                             "--fail-on regressed alone to fail on a significant loss")
        raise UsageError("--margin needs --require non-inferior or --require equivalent")
    if not 0 <= options.margin < 1:
        raise UsageError(f"--margin must be in [0, 1) (accuracy units: 0.02 = 2 points); got {options.margin}")
    if options.require == "equivalent" and options.margin == 0:
        raise UsageError("--require equivalent needs --margin above 0: no interval lies inside (0, 0)")


@dataclass(frozen=True)
class GateDecision:
    """The gate's decision over a comparison's rows.

    Attributes
    ----------
    fail_on, margin, require
        The question asked (:class:`GateOptions`).
    passed : bool
        No candidate failed.
    failed : tuple of dict
        One entry per failed candidate: candidate, baseline, reason, gap, lower, upper, interval_method.
    undecided : tuple of str
        Candidates without an interval (too few shared items or subjects). Under ``--fail-on``
        alone they are not decided at all (and named); under ``--require`` they fail.
    reason : str
        The one-line reason, naming the first failure or the rule that passed.
    """

    fail_on: str | None
    margin: float | None
    passed: bool
    failed: tuple[dict, ...]
    undecided: tuple[str, ...]
    reason: str
    require: str | None = None

    def as_dict(self) -> dict:
        return {"fail_on": self.fail_on, "require": self.require, "margin": self.margin, "passed": self.passed,
                "failed": [dict(f) for f in self.failed], "undecided": list(self.undecided), "reason": self.reason}


def _why_failed(row: dict, lower, upper, options: GateOptions) -> str | None:
    """Why one candidate fails the gate, or None when it passes."""
    if row["verdict"] == "regressed":
        return "regressed (verdict)"
    if options.require is None:
        return None
    d, pp = options.margin, f"{100 * options.margin:g}"
    if lower is None or upper is None:
        return f"not shown {options.require}: no interval (too few shared items or subjects)"
    if options.require == "non-inferior" and not lower > -d:
        return f"not shown non-inferior within the {pp} pp margin (the interval's lower end is not above -{pp} pp)"
    if options.require == "equivalent" and not (lower > -d and upper < d):
        return f"not shown equivalent within the {pp} pp margin (the interval is not inside (-{pp}, {pp}) pp)"
    return None


def _rule(options: GateOptions) -> str:
    pp = "" if options.margin is None else f"{100 * options.margin:g}"
    if options.require == "non-inferior":
        return f"every candidate is shown non-inferior within {pp} pp (interval's lower end above -{pp} pp)"
    if options.require == "equivalent":
        return f"every candidate is shown equivalent within {pp} pp (interval inside (-{pp}, {pp}) pp)"
    return "no candidate regressed"


def decide(rows: list[dict], alpha: float, options: GateOptions | None) -> GateDecision | None:
    """The gate's decision over the comparison rows (None when no gate was asked for).

    Each row needs ``candidate``, ``baseline``, ``verdict``, ``gap`` and ``interval`` (lower,
    upper); ``simultaneous_interval`` is used instead of ``interval`` when present. A candidate
    fails when its verdict is ``regressed`` (every mode), or when ``require`` is set and its
    interval does not show it (non-inferior: lower > -margin; equivalent: -margin < lower and
    upper < margin; no interval: not shown).
    """
    if options is None or (options.fail_on is None and options.require is None):
        return None
    failed, undecided = [], []
    for row in rows:
        iv = deciding_interval(row)
        lower, upper = iv.lower, iv.upper
        if lower is None or upper is None:
            undecided.append(row["candidate"])  # no interval (too few shared items or subjects)
        why = _why_failed(row, lower, upper, options)
        if why is not None:
            failed.append({"candidate": row["candidate"], "baseline": row["baseline"], "reason": why,
                           "gap": row.get("gap"), "lower": lower, "upper": upper,
                           "interval_method": iv.method})
    level = f"{100 * (1 - alpha):g}%"
    if failed:
        f = failed[0]
        more = f" (and {len(failed) - 1} more candidate(s))" if len(failed) > 1 else ""
        which = {"anytime": f"{level} anytime-valid interval",
                 "first_look": "first-look interval (at its share of alpha)"}.get(f["interval_method"],
                                                                                 f"{level} interval")
        reason = (f"gate failed: {f['candidate']!r} against {f['baseline']!r}: {f['reason']}; gap "
                  f"{_pp(f['gap'])} pp, {which} [{_pp(f['lower'])}, {_pp(f['upper'])}] pp{more}")
    else:
        rule = _rule(options)
        if undecided:  # passing is not evidence here: say that these were not decided at all
            rule += (f"; not decided, no interval (too few shared items or subjects): "
                     f"{', '.join(repr(c) for c in undecided)}")
        reason = f"gate passed: {rule} ({len(rows)} candidate(s), {level})"
    return GateDecision(fail_on=options.fail_on, margin=options.margin, passed=not failed, failed=tuple(failed),
                        undecided=tuple(undecided), reason=reason, require=options.require)


def _pp(x) -> str:
    return "nan" if x is None else f"{100 * x:.2f}"


def margin_reason(lower, upper, options: GateOptions) -> str | None:
    """Why an interval does not show what ``options.require`` asks (None when it does): the margin test
    alone, without the verdict rule (a suite replaces that by its family-wise one, tasks/compare/suite.py)."""
    return _why_failed({"verdict": "inconclusive"}, lower, upper, options)
