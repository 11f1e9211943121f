"""What every typed result shares: a table for polars and pandas, and a view in a notebook.

A service returns a frozen dataclass (an audit's :class:`~benchcert.tasks.audit.audit_result.AuditResult`,
a comparison's :class:`~benchcert.tasks.compare.service.ComparisonResult`); the command line and
the Python API (:mod:`benchcert`) render the same object, so the two never disagree.  Each of
them mixes in :class:`TableResult`: ``to_polars()`` gives its rows as a table, ``to_pandas()``
the same table for pandas users, and Jupyter shows ``_repr_html_`` (the table and an interval
chart, built in :mod:`benchcert.tasks.render.notebook`, where all HTML is made).
"""

from __future__ import annotations

import math
from typing import Any


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float, or None for a missing, NaN or infinite value (JSON's null)."""
    if value is None:
        return None
    x = float(value)
    return x if math.isfinite(x) else None


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
