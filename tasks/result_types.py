"""The pieces every typed result shares: an interval, and what a result does in a notebook.

A service returns a frozen dataclass (an audit's :class:`~benchcert.tasks.audit.audit_result.AuditResult`,
a comparison's :class:`~benchcert.tasks.compare.service.ComparisonResult`); the command line and
the Python API (:mod:`benchcert`) render the same object, so the two never disagree.  Each of
them mixes in :class:`TableResult`: ``to_polars()`` gives its rows as a table, ``to_pandas()``
the same table for pandas users, and Jupyter shows ``_repr_html_`` (the table and an interval
chart, built in :mod:`benchcert.tasks.render.notebook`, where all HTML is made).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float, or None for a missing, NaN or infinite value (JSON's null)."""
    if value is None:
        return None
    x = float(value)
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class Interval:
    """A two-sided interval for one estimand.

    Attributes
    ----------
    method : str or None
        How it was made (``hierarchical``, ``same_subjects``, ``stratified_items``, ``bonferroni``, ...).
    lower, upper : float or None
        Its ends (None: the data give no interval, e.g. too few shared items).
    half_width : float or None
        Half its width where the analysis reports one (it can exceed (upper - lower) / 2 when
        the ends are clipped to [0, 1]).
    alpha : float or None
        1 - its confidence level, where the analysis records it.
    se : float or None
        The standard error it was built from, where there is one.
    """

    method: str | None
    lower: float | None
    upper: float | None
    half_width: float | None = None
    alpha: float | None = None
    se: float | None = None

    @classmethod
    def from_dict(cls, d: Mapping | None) -> Interval | None:
        """The interval of a JSON row (``method``, ``lower``, ``upper`` and optional fields); None stays None."""
        if d is None:
            return None
        return cls(method=d.get("method"), lower=finite_or_none(d.get("lower")), upper=finite_or_none(d.get("upper")),
                   half_width=finite_or_none(d.get("half_width")), alpha=finite_or_none(d.get("alpha")),
                   se=finite_or_none(d.get("se")))

    @property
    def excludes_zero(self) -> bool:
        """True when the interval lies wholly above or wholly below 0 (False without an interval)."""
        if self.lower is None or self.upper is None:
            return False
        return self.lower > 0 or self.upper < 0

    def __str__(self) -> str:
        if self.lower is None or self.upper is None:
            return "[-, -]"
        return f"[{self.lower:.4g}, {self.upper:.4g}]"


class TableResult:
    """Mixed into every typed result: a table for polars and pandas, and an HTML view for Jupyter.

    A subclass defines :meth:`to_polars` and :meth:`_chart` (the intervals to draw, or None).
    """

    def _title(self) -> str:
        """The heading of the result's HTML view."""
        return type(self).__name__

    def to_polars(self):
        """The result's rows as a polars DataFrame."""
        raise NotImplementedError

    def to_pandas(self):
        """The same table as :meth:`to_polars`, as a pandas DataFrame (needs pandas installed)."""
        try:
            import pandas  # noqa: F401 - only to say clearly what is missing
        except ImportError as exc:
            raise ImportError("to_pandas() needs pandas; install it (pip install pandas) or use to_polars()") from exc
        return self.to_polars().to_pandas()

    def _chart(self) -> dict | None:
        """``{"labels", "series", "title", "x_label", "percent"}`` for an interval chart, or None."""
        return None

    def _notes(self) -> list[str]:
        return []

    def _repr_html_(self) -> str:
        from benchcert.tasks.render.notebook import result_html

        return result_html(self._title(), self.to_polars(), chart=self._chart(), notes=self._notes())
