"""The options the models chose, read from a log table beside the store (``benchcert items --choices``).

The store keeps each response's score, not the option a model chose; where a log carries it (the
bundled MMLU-Pro table's ``pred`` and ``answer`` columns), the item analysis reads it from the file
to add the share of strong models agreeing on one non-key answer to each suspected broken key.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from benchcert.tasks.errors import DataError

#: The fields read and their default column names.
FIELDS = {"model": "model", "item_id": "item_id", "choice": "choice", "key": "key"}


class ChoicesError(DataError):
    """The choices file cannot be read or lacks a column (exit code 1)."""


def parse_columns(text: str | None) -> dict[str, str]:
    """``model=COL,item_id=COL,choice=COL,key=COL`` (any subset) as a mapping; ValueError on a bad one."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, sep, col = part.partition("=")
        name, col = name.strip(), col.strip()
        if not sep or name not in FIELDS or not col:
            raise ValueError(f"--choice-columns takes FIELD=COLUMN pairs with FIELD one of {', '.join(FIELDS)}; "
                             f"got {part.strip()!r}")
        out[name] = col
    return out


def read_choices(path: str | Path, columns: dict[str, str]) -> pl.DataFrame:
    """model, item_id, choice, key (strings) of every row of the CSV file ``path`` (gzip allowed)."""
    names = {**FIELDS, **columns}
    try:
        frame = pl.read_csv(path, infer_schema=False)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise ChoicesError(f"{path}: cannot read the choices file: {exc}") from None
    missing = [f"{field} (column {col!r})" for field, col in names.items() if col not in frame.columns]
    if missing:
        raise ChoicesError(f"{path}: line 1: no column for {', '.join(missing)}; the file has "
                           f"{', '.join(frame.columns[:20])} (name them with --choice-columns)")
    return frame.select(pl.col(col).alias(field) for field, col in names.items())
