"""What the store does not keep, read from a table beside it: the options the models chose
(``benchcert items --choices``) and the items' texts (``--texts``).

The store keeps each response's score, not the option a model chose; where a log carries it (the
bundled MMLU-Pro table's ``pred`` and ``answer`` columns), the item analysis reads it from the file
to add the share of strong models agreeing on one non-key answer to each suspected broken key.
Nor does it keep an item's text; given one per item, the analysis looks for near-duplicates.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from benchcert.tasks.errors import DataError

#: The fields read and their default column names.
FIELDS = {"model": "model", "item_id": "item_id", "choice": "choice", "key": "key"}
#: The texts file's fields and their default column names.
TEXT_FIELDS = {"item_id": "item_id", "text": "text"}


class ChoicesError(DataError):
    """A choices or texts file cannot be read or lacks a column (exit code 1)."""


def parse_columns(text: str | None, fields: dict[str, str] = FIELDS, flag: str = "--choice-columns"
                  ) -> dict[str, str]:
    """``FIELD=COL,...`` (any subset of ``fields``) as a mapping; ValueError naming ``flag`` on a bad one."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, sep, col = part.partition("=")
        name, col = name.strip(), col.strip()
        if not sep or name not in fields or not col:
            raise ValueError(f"{flag} takes FIELD=COLUMN pairs with FIELD one of {', '.join(fields)}; "
                             f"got {part.strip()!r}")
        out[name] = col
    return out


def read_table(path: str | Path, columns: dict[str, str], fields: dict[str, str] = FIELDS,
               what: str = "choices", flag: str = "--choice-columns") -> pl.DataFrame:
    """The ``fields`` (strings) of every row of the CSV file ``path`` (gzip allowed), each read from its
    column (``columns``, else the field's default name)."""
    names = {**fields, **columns}
    try:
        frame = pl.read_csv(path, infer_schema=False)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise ChoicesError(f"{path}: cannot read the {what} file: {exc}") from None
    missing = [f"{field} (column {col!r})" for field, col in names.items() if col not in frame.columns]
    if missing:
        raise ChoicesError(f"{path}: line 1: no column for {', '.join(missing)}; the file has "
                           f"{', '.join(frame.columns[:20])} (name them with {flag})")
    return frame.select(pl.col(col).alias(field) for field, col in names.items())


def read_choices(path: str | Path, columns: dict[str, str]) -> pl.DataFrame:
    """model, item_id, choice, key (strings) of every row of the CSV file ``path`` (gzip allowed)."""
    return read_table(path, columns)


def read_texts(path: str | Path, columns: dict[str, str]) -> pl.DataFrame:
    """item_id, text (strings) of every row of the CSV file ``path``, one row per item (the first kept)."""
    return read_table(path, columns, TEXT_FIELDS, "texts", "--text-columns").unique("item_id", keep="first",
                                                                                  maintain_order=True)
