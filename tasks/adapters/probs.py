"""Option probabilities from CSV/JSONL/Parquet columns (``--map prob_<option>=COLUMN``).

A table whose rows carry one probability per answer option maps each option's column with
``--map prob_A=pA --map prob_B=pB ...`` (the option names are the suffixes) and, optionally,
the correct option with ``--map label=COLUMN`` (its value is one of the option names).  The
probabilities are kept in the ``option_probs`` table beside the response, like the
multiple-choice log-likelihoods of lm-evaluation-harness logs, and read by ``benchcert gof``
and the audit's calibration analysis.

A row whose probabilities are not a probability vector - a missing or non-numeric value, a
negative one, NaN or infinity, or a sum further than :data:`SUM_TOLERANCE` from 1 - or whose
label is not one of the options is rejected like any bad row (file, line, field, reason);
accepted rows are stored divided by their sum.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import polars as pl

from benchcert.tasks.adapters.generic import LINE, AdapterError, RawBatch, Reject

#: How far a row's probabilities may sum from 1 (rounding in a written file) before it is refused.
SUM_TOLERANCE = 1e-3
PROB_FIELD = re.compile(r"prob_([A-Za-z0-9_.-]+)")
#: Mapping fields this module adds to the canonical ones.
LABEL_FIELD = "label"


def is_probability_field(name: str) -> bool:
    return name == LABEL_FIELD or PROB_FIELD.fullmatch(name) is not None


def mapped_columns(mapping_columns: dict[str, str], available: list[str], path) -> dict[str, str]:
    """The probability fields of a mapping (``prob_<option>`` in the order given, then ``label``) -> file column.

    Raises AdapterError when a mapped column is not in the file, or a label is mapped without
    any probability column.
    """
    out = {f: c for f, c in mapping_columns.items() if PROB_FIELD.fullmatch(f)}
    if LABEL_FIELD in mapping_columns:
        if not out:
            raise AdapterError(f"{path}: --map label= names the correct option among the probability columns; "
                               "map those too with --map prob_<option>=COLUMN")
        out[LABEL_FIELD] = mapping_columns[LABEL_FIELD]
    if len([f for f in out if f != LABEL_FIELD]) == 1:
        raise AdapterError(f"{path}: one probability column mapped; give one per option (at least two), "
                           "e.g. --map prob_A=pA --map prob_B=pB")
    missing = {f: c for f, c in out.items() if c not in available}
    if missing and available:
        raise AdapterError(f"{path}: column(s) {', '.join(f'{c!r} (for {f})' for f, c in missing.items())} "
                           f"not in the file; its columns are {available}")
    return out


def attach(batches: Iterator[RawBatch], prob_cols: dict[str, str]) -> Iterator[RawBatch]:
    """Move each batch's probability columns into ``extras`` (LINE, option_probs, label); bad rows become rejects."""
    options = [PROB_FIELD.fullmatch(f).group(1) for f in prob_cols if f != LABEL_FIELD]
    cols = [c for f, c in prob_cols.items() if f != LABEL_FIELD]
    label_col = prob_cols.get(LABEL_FIELD)
    for raw in batches:
        frame = raw.frame
        if frame.height == 0:
            yield raw
            continue
        n = frame.height
        values = np.full((n, len(cols)), np.nan)
        why: list[str | None] = [None] * n
        where: list[str | None] = [None] * n
        for j, c in enumerate(cols):
            s = frame[c]
            num = s.cast(pl.Float64, strict=False) if s.dtype != pl.String else \
                s.str.strip_chars().cast(pl.Float64, strict=False)
            arr = num.to_numpy().astype(float)
            given = (s.is_not_null() & (s.cast(pl.String).str.strip_chars() != "")).to_numpy() \
                if s.dtype == pl.String else s.is_not_null().to_numpy()
            values[:, j] = arr
            for i in np.flatnonzero(~given | np.isnan(arr) & given):
                if why[i] is None:
                    why[i], where[i] = ("missing probability" if not given[i] else
                                        f"probability is not a number: {str(s[int(i)])[:40]!r}"), c
        bad_value = ~np.isfinite(values) & ~np.isnan(values)
        for i in np.flatnonzero(bad_value.any(axis=1)):
            if why[i] is None:
                j = int(np.flatnonzero(bad_value[i])[0])
                why[i], where[i] = f"probability is not finite ({values[i, j]})", cols[j]
        neg = np.nan_to_num(values, nan=0.0) < 0
        for i in np.flatnonzero(neg.any(axis=1)):
            if why[i] is None:
                j = int(np.flatnonzero(neg[i])[0])
                why[i], where[i] = f"negative probability {values[i, j]:g}", cols[j]
        sums = values.sum(axis=1)
        for i in np.flatnonzero(np.isfinite(sums) & (np.abs(sums - 1.0) > SUM_TOLERANCE)):
            if why[i] is None:
                why[i], where[i] = (f"probabilities sum to {sums[i]:.6g}, not 1 (tolerance {SUM_TOLERANCE:g})",
                                    ",".join(cols))
        labels = np.full(n, -1, dtype=np.int64)
        if label_col is not None:
            text = frame[label_col].cast(pl.String).str.strip_chars().to_list()
            index = {o: k for k, o in enumerate(options)}
            for i, t in enumerate(text):
                if t in index:
                    labels[i] = index[t]
                elif why[i] is None:
                    why[i], where[i] = (("missing label" if t in (None, "") else
                                         f"label {t[:40]!r} is not one of the options {', '.join(options)}"),
                                        label_col)
        bad = np.array([w is not None for w in why])
        lines = frame[LINE].to_numpy()
        rejects = list(raw.rejects) + [Reject(int(lines[i]), where[i], why[i]) for i in np.flatnonzero(bad)]
        keep = ~bad
        probs = values[keep] / sums[keep][:, None]
        extras = pl.DataFrame({LINE: pl.Series(lines[keep], dtype=pl.Int64),
                               "option_probs": pl.Series([list(r) for r in probs], dtype=pl.List(pl.Float64)),
                               "label": pl.Series([int(v) if v >= 0 else None for v in labels[keep]],
                                                  dtype=pl.Int64)})
        yield RawBatch(frame=frame.filter(pl.Series(keep)), rejects=rejects, extras=extras)
