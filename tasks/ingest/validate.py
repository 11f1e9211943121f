"""Column-wise validation of raw adapter batches into canonical rows.

The rules are those of :class:`benchcert.tasks.schemas.ResponseRow`, applied to whole
columns at once (a per-row pydantic call would cost ~100x more at 10 million rows); a
property test checks that both give the same verdict on every row.
"""

from __future__ import annotations

import polars as pl

from benchcert.tasks.ingest.adapters.generic import LINE
from benchcert.tasks.schemas import DEFAULT_DOMAIN, DEFAULT_SUBJECT

CANONICAL_SCHEMA = {
    "benchmark": pl.String,
    "model": pl.String,
    "item_id": pl.String,
    "subject": pl.String,
    "domain": pl.String,
    "score": pl.Float64,
    "variant": pl.String,
    "replicate": pl.Int64,
    "line": pl.Int64,
    "human_score": pl.Float64,  # null when the row carries none
    "parsed": pl.Boolean,  # null when the log does not say whether the answer could be read
}
REJECT_SCHEMA = {"line": pl.Int64, "field": pl.String, "reason": pl.String}
#: The largest replicate index: every integer up to 2^53 survives a float (JSON numbers, CSV text).
MAX_REPLICATE = 2**53

_DEFAULTS = {"subject": DEFAULT_SUBJECT, "domain": DEFAULT_DOMAIN, "variant": ""}
#: Names typed on the command line (benchmark, model, variant) hold no control character (NUL, tab,
#: newline, DEL ...): such a name could be stored but never named again (issue #26).
NAMES = ("benchmark", "model", "variant")
CONTROL = r"[\x00-\x1f\x7f]"
CONTROL_REASON = "contains a control character (NUL, tab, newline, ...); a name must be printable"
_INTEGER = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64)
_NUMERIC = (pl.Float32, pl.Float64) + _INTEGER


#: Text fields whose file column is read once into a Categorical (see :func:`_text_columns`).
_CODED_TEXT = ("model", "item_id", "subject", "domain")
_TEXT_PREFIX = "__text_"


def _text_columns(frame: pl.DataFrame, columns: list[str]) -> dict[str, pl.Series]:
    """Each column without surrounding blanks: a Categorical, unless some value needed stripping.

    A log repeats each model, subject and item many times, so the strip runs on the distinct
    values (the Categorical's categories) instead of on every row, and the Categorical's
    physical ids let the ingest code rows with integer work (:meth:`CodeBook.codes`).  Each
    mapping is private to its column and is freed with it.  When some distinct value does
    change under the strip, the column is stripped row by row and returned as text.
    """
    categories = {c: pl.Categories.random() for c in columns}
    # One select: Polars casts the columns side by side on its threads.
    coded = frame.select(pl.col(c).cast(pl.Categorical(categories[c])) for c in columns)
    out = {}
    for c in columns:
        names = coded[c].unique().cast(pl.String)
        out[c] = (coded[c] if names.str.strip_chars().equals(names, check_names=False)
                  else frame[c].str.strip_chars())  # rare: strip every row
    return out


def _string_field(name: str, col: str | None, dtype, constant: str | None, text: str | None = None):
    """(value expr, error expr) for a string field; a row is bad exactly when the value is null or ''.

    ``text``: the frame column that already holds the stripped text (:func:`_text_columns`).
    """
    if col is None:
        value = constant if constant is not None else _DEFAULTS.get(name)
        return pl.lit(value, dtype=pl.String), pl.lit(None, dtype=pl.String)
    # A number's text has no surrounding blanks: only text columns need stripping.
    if text is not None:
        v = pl.col(text)
    elif dtype in _INTEGER and name in _CODED_TEXT:
        # An integer id stays an integer: its text is its decimal form, and the coding step
        # formats only the distinct values (CodeBook.codes).
        return pl.col(col), pl.when(pl.col(col).is_null()).then(pl.lit("missing value")).otherwise(
            pl.lit(None, dtype=pl.String))
    else:
        v = pl.col(col).cast(pl.String) if dtype in _NUMERIC else pl.col(col).cast(pl.String).str.strip_chars()
    if name == "variant":
        return v.fill_null(""), pl.when(v.str.contains(CONTROL)).then(pl.lit(CONTROL_REASON)).otherwise(
            pl.lit(None, dtype=pl.String))
    err = pl.when(v.is_null() | (v == "")).then(pl.lit("missing value"))
    if name in NAMES:
        err = err.when(v.cast(pl.String).str.contains(CONTROL)).then(pl.lit(CONTROL_REASON))
    return v, err.otherwise(pl.lit(None, dtype=pl.String))


#: Why a row with a human score and no judge score is refused (docs/analyses.md, "Judge scores").
HUMAN_ONLY = ("missing value: the row has a human_score but no judge score; every human-labelled response "
              "needs the judge's score too")


def _score_field(col: str, dtype, *, optional: bool = False):
    """(value expr, error expr); a row is bad exactly when the value is null, NaN or outside [0, 1].

    ``optional`` (human_score): a missing value is no error and reads null.
    """
    if dtype == pl.Boolean or dtype in _NUMERIC:
        x = pl.col(col).cast(pl.Float64)
    else:
        s = pl.col(col).cast(pl.String).str.strip_chars()
        low = s.str.to_lowercase()
        x = (pl.when(low == "true").then(pl.lit(1.0))
             .when(low == "false").then(pl.lit(0.0))
             .otherwise(s.cast(pl.Float64, strict=False)))
    shown = pl.col(col).cast(pl.String).str.strip_chars() if dtype == pl.String else pl.col(col).cast(pl.String)
    missing = pl.col(col).is_null() | (pl.col(col).cast(pl.String).str.strip_chars() == "")
    err = (pl.when(missing).then(pl.lit(None if optional else "missing value", dtype=pl.String))
           .when(x.is_null()).then(pl.format("not a number: '{}'", shown))
           .when(x.is_nan()).then(pl.lit("not a number: NaN"))
           .when((x < 0) | (x > 1)).then(pl.format("score {} outside [0, 1]", shown))
           .otherwise(pl.lit(None, dtype=pl.String)))
    if optional:  # missing reads null; text that is no number reads NaN, so the row is judged bad
        x = (pl.when(missing).then(pl.lit(None, dtype=pl.Float64))
             .when(x.is_null()).then(pl.lit(float("nan"))).otherwise(x))
    return x, err


#: The text a parse flag may be written as (any case, blanks around it ignored); blank is null.
PARSED_TRUE = ("true", "1", "1.0", "yes")
PARSED_FALSE = ("false", "0", "0.0", "no")
_BAD_FLAG = -1  # the value of a flag that is none of these (the row is judged bad from the value alone)


def _parsed_field(col: str | None, dtype):
    """(value expr, error expr) of the parse flag: an Int8 1 / 0 / null, or -1 for a value that is
    no flag (the row is bad); the caller casts the good rows' values to Boolean."""
    if col is None:
        return pl.lit(None, dtype=pl.Int8), pl.lit(None, dtype=pl.String)
    shown = pl.col(col).cast(pl.String)
    if dtype == pl.Boolean:
        value = pl.col(col).cast(pl.Int8)
    elif dtype in _NUMERIC:
        x = pl.col(col).cast(pl.Float64)
        value = (pl.when(x.is_null()).then(pl.lit(None, dtype=pl.Int8)).when(x == 1).then(pl.lit(1, dtype=pl.Int8))
                 .when(x == 0).then(pl.lit(0, dtype=pl.Int8)).otherwise(pl.lit(_BAD_FLAG, dtype=pl.Int8)))
    else:
        low = shown.str.strip_chars().str.to_lowercase()
        value = (pl.when(low.is_null() | (low == "")).then(pl.lit(None, dtype=pl.Int8))
                 .when(low.is_in(PARSED_TRUE)).then(pl.lit(1, dtype=pl.Int8))
                 .when(low.is_in(PARSED_FALSE)).then(pl.lit(0, dtype=pl.Int8))
                 .otherwise(pl.lit(_BAD_FLAG, dtype=pl.Int8)))
    err = pl.when(value.eq_missing(_BAD_FLAG)).then(
        pl.format("not a parse flag: '{}' (expected true/false, 1/0, yes/no, or blank)", shown)).otherwise(
        pl.lit(None, dtype=pl.String))
    return value, err


def _replicate_field(col: str | None, dtype):
    """(value expr, error expr); the value is null exactly when the row is bad."""
    if col is None:
        return pl.lit(0, dtype=pl.Int64), pl.lit(None, dtype=pl.String)
    shown = pl.col(col).cast(pl.String)
    missing = pl.col(col).is_null() | (shown.str.strip_chars() == "")
    if dtype in _INTEGER:
        # Compared as integers: a UInt64 beyond Int64 or a value past 2^53 is refused, not wrapped.
        v = pl.col(col)
        too_big = v > MAX_REPLICATE
        value = pl.when(v.is_not_null() & (v >= 0) & ~too_big).then(
            v.cast(pl.Int64, strict=False)).otherwise(pl.lit(None, dtype=pl.Int64))
        err = (pl.when(missing).then(pl.lit("missing value"))
               .when(v < 0).then(pl.format("replicate {} is negative", shown))
               .when(too_big).then(pl.format("replicate {} is larger than 2^53", shown))
               .otherwise(pl.lit(None, dtype=pl.String)))
        return value, err
    if dtype in _NUMERIC:
        f = pl.col(col).cast(pl.Float64)
        i = pl.lit(None, dtype=pl.Int64)
    else:
        text = pl.col(col).cast(pl.String).str.strip_chars()
        f = text.cast(pl.Float64, strict=False)
        i = text.cast(pl.Int64, strict=False)  # integer text is judged exactly, not through a float
    whole = i.is_not_null() | (f.is_not_null() & f.is_finite() & (f == f.floor()))
    # Beyond 2^53 a float no longer holds every integer, so 1e30, 2^63 or 2^53 + 1 is refused
    # (and never reaches the Int64 cast, which would fail the whole batch).
    too_big = pl.when(i.is_not_null()).then(i > MAX_REPLICATE).otherwise(f > MAX_REPLICATE)
    negative = pl.when(i.is_not_null()).then(i < 0).otherwise(f < 0)
    fits = whole & ~negative & ~too_big
    value = pl.when(fits).then(pl.coalesce(i, f.cast(pl.Int64, strict=False))).otherwise(pl.lit(None, dtype=pl.Int64))
    err = (pl.when(missing).then(pl.lit("missing value"))
           .when(~whole).then(pl.format("not an integer: '{}'", shown))
           .when(negative).then(pl.format("replicate {} is negative", shown))
           .when(too_big).then(pl.format("replicate {} is larger than 2^53", shown))
           .otherwise(pl.lit(None, dtype=pl.String)))
    return value, err


def _is_bad(name: str, col: str | None, dtype) -> pl.Expr | None:
    """Whether a row's canonical value is invalid, from the value alone (cheap: no message text).

    ``dtype`` is the value's own type (an integer id is bad only when missing).
    """
    if col is None:
        return None
    v = pl.col(name)
    if name == "variant":
        return v.str.contains(CONTROL)
    if name == "score":
        return v.is_null() | v.is_nan() | (v < 0) | (v > 1)
    if name == "human_score":  # optional: null is fine (never null itself, so any_horizontal stays boolean)
        return v.is_not_null() & (v.is_nan() | (v < 0) | (v > 1))
    if name == "parsed":  # optional: null is fine
        return v.eq_missing(_BAD_FLAG)
    if name == "replicate" or dtype in _INTEGER:
        return v.is_null()
    if name in NAMES:
        return v.is_null() | (v == "") | v.cast(pl.String).str.contains(CONTROL)
    return v.is_null() | (v == "")


def validate_batch(frame: pl.DataFrame, columns: dict[str, str | None], *,
                   benchmark: str | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split a raw batch into canonical rows and (line, field, reason) rejects.

    ``columns`` maps each canonical field to its file column (None = not in the file).
    ``benchmark`` is the constant benchmark name when no column carries it.  The values are
    computed for every row and judged from the values alone; the messages, which cost a
    string per row, are built only for the rows that fail.  In the good rows, model, item_id,
    subject and domain may be Categorical (text read once, :func:`_text_columns`) or, for an
    integer column, the integers (whose text is their decimal form); ``.cast(pl.String)``
    gives the canonical text of either.
    """
    schema = frame.schema
    texts = _text_columns(frame, list(dict.fromkeys(
        c for name in _CODED_TEXT if (c := columns.get(name)) is not None and schema[c] == pl.String)))
    if texts:
        frame = frame.with_columns(s.alias(_TEXT_PREFIX + c) for c, s in texts.items())
    exprs: dict[str, tuple[pl.Expr, pl.Expr]] = {}
    for name in ("benchmark", "model", "item_id", "subject", "domain", "variant"):
        col = columns.get(name)
        exprs[name] = _string_field(name, col, schema.get(col) if col else None,
                                    benchmark if name == "benchmark" else None,
                                    _TEXT_PREFIX + col if name in _CODED_TEXT and col in texts else None)
    exprs["score"] = _score_field(columns["score"], schema[columns["score"]])
    rep_col = columns.get("replicate")
    exprs["replicate"] = _replicate_field(rep_col, schema.get(rep_col) if rep_col else None)
    human_col = columns.get("human_score")
    if human_col is not None and human_col in schema:  # a harness log's frame may not carry the field
        exprs["human_score"] = _score_field(human_col, schema[human_col], optional=True)
        value, err = exprs["score"]
        exprs["score"] = (value, pl.when(err.eq_missing("missing value") & exprs["human_score"][0].is_not_null())
                          .then(pl.lit(HUMAN_ONLY)).otherwise(err))
    else:
        human_col = None
        exprs["human_score"] = (pl.lit(None, dtype=pl.Float64), pl.lit(None, dtype=pl.String))
    parsed_col = columns.get("parsed")
    if parsed_col is not None and parsed_col not in schema:  # a harness log's frame may not carry the field
        parsed_col = None
    exprs["parsed"] = _parsed_field(parsed_col, schema[parsed_col] if parsed_col else None)

    values = frame.select([v.alias(name) for name, (v, _) in exprs.items()] + [pl.col(LINE).alias("line")])
    used = {**columns, "human_score": human_col, "parsed": parsed_col}
    flags = [f for name in exprs if (f := _is_bad(name, used.get(name) if name != "benchmark" or benchmark is None
                                                    else None, values.schema[name])) is not None]
    bad_mask = values.select(pl.any_horizontal(flags).alias("bad")).to_series() if flags else None
    # Text stays Categorical, and integer ids integers, where they are (the coding step reads them).
    canonical = {f: t for f, t in CANONICAL_SCHEMA.items()
                 if not (t == pl.String and (isinstance(values.schema[f], pl.Categorical)
                                             or values.schema[f] in _INTEGER))}
    if bad_mask is None or not bad_mask.any():
        return values.select(list(CANONICAL_SCHEMA)).cast(canonical), pl.DataFrame(schema=REJECT_SCHEMA)
    good = values.filter(~bad_mask).select(list(CANONICAL_SCHEMA)).cast(canonical)
    checked = frame.filter(bad_mask).select([e.alias(f"__err_{name}") for name, (_, e) in exprs.items()]
                                            + [pl.col(LINE).alias("line")])
    rejects = pl.concat([
        checked.filter(pl.col(f"__err_{name}").is_not_null()).select(
            pl.col("line"), pl.lit(columns.get(name) or name).alias("field"),
            pl.col(f"__err_{name}").alias("reason"))
        for name in exprs
    ]).sort("line").cast(REJECT_SCHEMA)
    return good, rejects
