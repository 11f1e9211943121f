"""The one order of models in a report and on the dashboard: by the pooled score, best first, ties by name.

The pooled (item-weighted) score is what the comparisons rank by, and it is the estimate of the pooled
headline interval, so the tables, the charts and the ranks of a report read in the same order, and the
dashboard lists models the same way
(:func:`benchcert.tasks.render.run_records.headline_order`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import polars as pl

__all__ = ["sort_frame", "order_models"]


def sort_frame(frame: pl.DataFrame, pooled: str, model: str = "model") -> pl.DataFrame:
    """``frame`` sorted by column ``pooled`` descending (missing last), ties by ``model``."""
    return frame.sort([pooled, model], descending=[True, False], nulls_last=True)


def order_models(models: Sequence[str], pooled: Sequence[float]) -> list[str]:
    """``models`` in the one order, given each one's pooled score (NaN last)."""
    p = np.asarray(pooled, dtype=float)
    return [models[i] for i in sorted(range(len(models)),
                                      key=lambda i: (np.isnan(p[i]), -p[i] if not np.isnan(p[i]) else 0.0, models[i]))]
