"""``benchcert.audit(frame, ...)``: one call from a DataFrame to an audit, and a small example frame."""

from __future__ import annotations

import os
from typing import Any

from benchcert._store import Store

#: Throw-away stores of one-call audits: kept until the interpreter exits, so the run folder a
#: result points at (report.html, tables) stays readable for the session.
_KEPT: list[Store] = []


def audit(frame: Any, *, model: str, item: str, score: str, subject: str | None = None, domain: str | None = None,
          benchmark: str = "frame", artifacts: str | os.PathLike | None = None, **options):
    """Audit a DataFrame of item-level results in one call, in a throw-away store.

    Parameters
    ----------
    frame : polars.DataFrame or pandas.DataFrame
        One row per (model, item): the model's score on the item, in [0, 1].
    model, item, score : str
        The columns holding the model's name, the item's id and the score.
    subject, domain : str, optional
        The columns holding the item's subject and domain (the clusters of the hierarchical
        bound); without them every item is in one subject.
    benchmark : str
        The benchmark's name in the run's artifacts.
    artifacts : path, optional
        Where the run folder is written (default: a temporary folder kept until Python exits).
    **options
        The audit's settings (:meth:`Store.audit`): ``alpha``, ``hierarchy``, ``baseline``, ...

    Returns
    -------
    AuditResult
        The same result ``benchcert audit`` prints for these rows.

    Examples
    --------
    >>> import benchcert as bc
    >>> result = bc.audit(bc.example_frame(), model="model", item="item", subject="subject", score="score")
    >>> row = result.model("weak")
    >>> round(row.pooled.estimate, 3), row.n_items
    (0.5, 200)
    """
    columns = {"model": model, "item_id": item, "score": score, "subject": subject, "domain": domain}
    for field, column in columns.items():
        if column is not None and not isinstance(column, str):
            raise ValueError(f"{'item' if field == 'item_id' else field} must be a column name; got {column!r}")
    store = Store(artifacts=artifacts)
    _KEPT.append(store)
    store.ingest(frame, benchmark=benchmark, mapping=columns, name=benchmark)
    return store.audit(benchmark, **options)


def example_store() -> Store:
    """A throw-away :class:`Store` holding :func:`example_frame` as benchmark ``"toy"``.

    Examples
    --------
    >>> import benchcert as bc
    >>> store = bc.example_store()
    >>> store.compare("strong", "weak", benchmark="toy").comparisons[0].verdict
    'improved'
    """
    store = Store()
    store.ingest(example_frame(), benchmark="toy", mapping={"item_id": "item", "subject": "subject", "score": "score"})
    return store


def example_frame():
    """A small polars DataFrame of item-level results: two models on 200 items in 4 subjects.

    ``strong`` answers 150 of 200 items right (75%), ``weak`` 100 (50%); columns ``model``, ``item``,
    ``subject``, ``score``.  For trying the API, not for conclusions.

    Examples
    --------
    >>> import benchcert as bc
    >>> frame = bc.example_frame()
    >>> frame.shape, frame.columns
    ((400, 4), ['model', 'item', 'subject', 'score'])
    """
    import polars as pl

    rows = []
    for i in range(200):
        subject = f"subject-{i // 50}"
        rows.append(("strong", f"q{i:03d}", subject, float(i % 4 != 0)))
        rows.append(("weak", f"q{i:03d}", subject, float(i % 2 == 0)))
    return pl.DataFrame(rows, schema={"model": pl.String, "item": pl.String, "subject": pl.String,
                                      "score": pl.Float64}, orient="row")
