"""A comparison's row as a typed, frozen object, and the one rule for which interval decides its verdict.

Every paired comparison (``compare``, ``compare --scale human``, a recorded look, the gates)
reports a gap (candidate - baseline) with an interval; with several candidates the Bonferroni
simultaneous interval is shown and decides, so that no verdict contradicts the interval beside it.
:func:`deciding_interval` is that rule, written once; the service's verdict rule
(:func:`benchcert.tasks.compare.service.interval_verdicts`) reads the interval it returns.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from benchcert.tasks.result_types import finite_or_none

#: The verdict words, in the order a table lists them.
VERDICTS = ("improved", "regressed", "inconclusive")


@dataclass(frozen=True)
class GapInterval:
    """An interval for a gap (candidate - baseline).

    Attributes
    ----------
    method : str or None
        Its construction (``stratified_items``, ``clustered_subject``, ``paired_clt``,
        ``betting_plugin``, ``bonferroni``, ``anytime``, ...).
    lower, upper : float or None
        Its ends; None when the data give none (too few shared items or subjects).
    se : float or None
        The standard error it was built from, where there is one.

    Examples
    --------
    >>> from benchcert import GapInterval
    >>> GapInterval("paired_clt", -0.01, 0.03).decided, GapInterval("paired_clt", 0.01, 0.03).decided
    (False, True)
    """

    method: str | None
    lower: float | None
    upper: float | None
    se: float | None = None

    @classmethod
    def from_dict(cls, d: Mapping | None) -> GapInterval | None:
        if d is None:
            return None
        return cls(method=d.get("method"), lower=finite_or_none(d.get("lower")), upper=finite_or_none(d.get("upper")),
                   se=finite_or_none(d.get("se")))

    @property
    def decided(self) -> bool:
        """True when the interval lies wholly above or below 0 (False without an interval)."""
        return self.lower is not None and self.upper is not None and (self.lower > 0 or self.upper < 0)


def deciding_interval(row: Mapping) -> GapInterval:
    """The interval that decides a comparison row's verdict: its simultaneous (Bonferroni) interval
    when it belongs to a family of several candidates, else its own ``interval``."""
    chosen = row.get("simultaneous_interval") or row["interval"]
    iv = GapInterval.from_dict(chosen)
    if iv.method is None:
        iv = GapInterval(method=row.get("method"), lower=iv.lower, upper=iv.upper, se=iv.se)
    return iv


@dataclass(frozen=True)
class ComparisonRow(Mapping):
    """One candidate against the baseline: the gap, the interval that decides, the verdict.

    The typed fields are the ones every reader needs; the row's whole JSON document (``--json``'s
    ``comparisons[i]``: per-test intervals and p-values, adjusted p-values, the minimum detectable
    effect, counts of excluded items, ...) stays readable as a mapping, ``row["p_values"]``, and
    :meth:`as_dict` copies it.

    Attributes
    ----------
    candidate, baseline : str
    verdict : str
        ``improved``, ``regressed`` or ``inconclusive``: read off :attr:`deciding_interval`.
    gap : float or None
        The estimate of the gap the verdict is about (the result's ``estimand``).
    interval : GapInterval
        The primary interval of this comparison alone.
    simultaneous_interval : GapInterval or None
        The Bonferroni interval over the family, when there are several candidates.
    p_value : float or None
        The primary test's p-value (unadjusted).
    n_shared : int or None
        Items both models answered.

    Examples
    --------
    >>> import benchcert as bc
    >>> row = bc.example_store().compare("strong", "weak", benchmark="toy").row("strong")
    >>> row.verdict, row.deciding_interval.decided, row.deciding_interval.lower > 0
    ('improved', True, True)
    >>> sorted(row["p_values"])[:2]  # the JSON row's other fields
    ['clustered_subject', 'hoeffding']
    """

    candidate: str
    baseline: str
    verdict: str
    gap: float | None
    interval: GapInterval
    simultaneous_interval: GapInterval | None = None
    p_value: float | None = None
    n_shared: int | None = None
    fields: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, row: Mapping) -> ComparisonRow:
        """The typed row of a service's JSON row (which it keeps whole in :attr:`fields`)."""
        frozen = copy.deepcopy(dict(row))
        return cls(candidate=str(row["candidate"]), baseline=str(row["baseline"]), verdict=str(row["verdict"]),
                   gap=finite_or_none(row.get("gap")), interval=GapInterval.from_dict(row["interval"]),
                   simultaneous_interval=GapInterval.from_dict(row.get("simultaneous_interval")),
                   p_value=finite_or_none(row.get("p_value")), n_shared=row.get("n_shared"), fields=frozen)

    @property
    def deciding_interval(self) -> GapInterval:
        """The interval the verdict is read from (:func:`deciding_interval`)."""
        return deciding_interval(self.fields)

    def as_dict(self) -> dict:
        """The row's JSON document (a copy)."""
        return copy.deepcopy(dict(self.fields))

    # Read as a mapping, the row is its JSON document: the readers of ``--json`` rows keep working.
    def __getitem__(self, key: str):
        return self.fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def table_row(self) -> dict:
        """The row's flat columns for :meth:`ComparisonResult.to_polars`: ``mde`` beside ``mde_alpha``, the two-sided
        level it is stated at (the row's alpha, or a family's Bonferroni level; in a suite alpha / m, the level of
        the suite's claim, while the row's own ``verdict`` is decided at alpha)."""
        iv = self.deciding_interval
        return {"candidate": self.candidate, "baseline": self.baseline, "gap": self.gap, "lower": iv.lower,
                "upper": iv.upper, "interval_method": iv.method, "p_value": self.p_value,
                "mde": finite_or_none(self.fields.get("mde")),
                "mde_alpha": finite_or_none(self.fields.get("mde_alpha")), "n_shared": self.n_shared,
                "n_excluded": self.fields.get("n_excluded"), "verdict": self.verdict}
