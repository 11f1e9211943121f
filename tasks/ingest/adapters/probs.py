"""Option probabilities from CSV/JSONL/Parquet columns (``--map prob_<option>=COLUMN``).

A table whose rows carry one probability per answer option maps each option's column with
``--map prob_A=pA --map prob_B=pB ...`` (the option names are the suffixes) and, optionally,
the correct option with ``--map label=COLUMN`` (its value is one of the option names).  The
probabilities are kept in the ``option_probs`` table beside the response, like the
multiple-choice log-likelihoods of lm-evaluation-harness logs, and read by ``benchcert gof``
and the audit's calibration analysis.

In long form (``--map option=COLUMN --map prob=COLUMN``) each row gives one option of a response
(model, item, variant, replicate) and its probability; the rows of a response are gathered
(the whole file is read before they are checked, so this form is held in memory) and
stored with the response's first line.  The options are ordered by name.

A table with only the model's confidence in its own answer (``--map confidence=COLUMN``, a
probability in [0, 1]) gives a two-option vector (wrong, right) = (1 - c, c) whose correct
option is the score (which must then be 0 or 1): calibration and the goodness-of-fit test then
ask whether the stated confidence matches how often the answer is right.

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

from benchcert.tasks.ingest.adapters.generic import LINE, AdapterError, RawBatch, Reject

#: How far a row's probabilities may sum from 1 (rounding in a written file) before it is refused.
SUM_TOLERANCE = 1e-3
PROB_FIELD = re.compile(r"prob_([A-Za-z0-9_.-]+)")
#: Mapping fields this module adds to the canonical ones.
LABEL_FIELD = "label"


LONG_FIELDS = ("option", "prob")
CONFIDENCE_FIELD = "confidence"


def is_probability_field(name: str) -> bool:
    return (name in (LABEL_FIELD, CONFIDENCE_FIELD) or name in LONG_FIELDS
            or PROB_FIELD.fullmatch(name) is not None)


def mapped_columns(mapping_columns: dict[str, str], available: list[str], path) -> dict[str, str]:
    """The probability fields of a mapping (``prob_<option>`` in the order given, then ``label``) -> file column.

    Raises AdapterError when a mapped column is not in the file, or a label is mapped without
    any probability column.
    """
    out = {f: c for f, c in mapping_columns.items() if PROB_FIELD.fullmatch(f)}
    long = {f: mapping_columns[f] for f in LONG_FIELDS if f in mapping_columns}
    if CONFIDENCE_FIELD in mapping_columns:
        if out or long or LABEL_FIELD in mapping_columns:
            raise AdapterError(f"{path}: --map confidence= (the model's probability that its answer is right; "
                               "the score says whether it was) cannot be combined with option probabilities "
                               "or a label")
        col = mapping_columns[CONFIDENCE_FIELD]
        if available and col not in available:
            raise AdapterError(f"{path}: column {col!r} (for confidence) not in the file; its columns are "
                               f"{available}")
        return {CONFIDENCE_FIELD: col}
    if long:
        if out:
            raise AdapterError(f"{path}: map either one column per option (prob_<option>=) or the long form "
                               "(option= and prob=), not both")
        if len(long) != 2:
            raise AdapterError(f"{path}: the long form needs both --map option=COLUMN (the option of the row) and "
                               "--map prob=COLUMN (its probability)")
        out = dict(long)
    if LABEL_FIELD in mapping_columns:
        if not out:
            raise AdapterError(f"{path}: --map label= names the correct option among the probability columns; "
                               "map those too with --map prob_<option>=COLUMN")
        out[LABEL_FIELD] = mapping_columns[LABEL_FIELD]
    if not long and len([f for f in out if f != LABEL_FIELD]) == 1:
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


def _key_frame(frame: pl.DataFrame, key_cols: dict[str, str | None]) -> pl.Series:
    """One text key per row from the canonical key columns (as validation will read them, stripped)."""
    parts = []
    for f in ("benchmark", "model", "item_id", "variant", "replicate"):
        c = key_cols.get(f)
        if c is not None:
            parts.append(pl.col(c).cast(pl.String).str.strip_chars().fill_null(""))
    return frame.select(pl.concat_str(parts, separator="\x1f").alias("key")).to_series()


def attach_long(batches: Iterator[RawBatch], prob_cols: dict[str, str],
                key_cols: dict[str, str | None]) -> Iterator[RawBatch]:
    """Long form: gather every response's option rows, check them, and yield the file as one batch."""
    frames, rejects = [], []
    for raw in batches:
        rejects += raw.rejects
        if raw.frame.height:
            frames.append(raw.frame)
    if not frames:
        yield RawBatch(frame=pl.DataFrame(), rejects=rejects)
        return
    frame = pl.concat(frames, how="vertical_relaxed")
    opt_c, prob_c, label_c = prob_cols["option"], prob_cols["prob"], prob_cols.get(LABEL_FIELD)
    n = frame.height
    lines = frame[LINE].to_numpy()
    option = frame[opt_c].cast(pl.String).str.strip_chars().to_list()
    s = frame[prob_c]
    prob = (s.str.strip_chars() if s.dtype == pl.String else s).cast(pl.Float64, strict=False).to_numpy()
    raw_prob = s.cast(pl.String).to_list()
    label = frame[label_c].cast(pl.String).str.strip_chars().to_list() if label_c else [None] * n
    keys = _key_frame(frame, key_cols).to_list()
    why: dict[int, tuple[str, str]] = {}
    for i in range(n):
        if option[i] in (None, ""):
            why[i] = (opt_c, "missing option")
        elif raw_prob[i] is None or str(raw_prob[i]).strip() == "":
            why[i] = (prob_c, "missing probability")
        elif np.isnan(prob[i]):
            why[i] = (prob_c, f"probability is not a number: {str(raw_prob[i])[:40]!r}")
        elif not np.isfinite(prob[i]):
            why[i] = (prob_c, f"probability is not finite ({prob[i]})")
        elif prob[i] < 0:
            why[i] = (prob_c, f"negative probability {prob[i]:g}")
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    out_lines, out_probs, out_labels = [], [], []
    for k, rows in groups.items():
        if any(i in why for i in rows):  # one bad option row makes the response's vector unusable
            for i in rows:
                why.setdefault(i, (prob_c, "another option row of this response is bad"))
            continue
        opts = [option[i] for i in rows]
        problem = None
        if len(set(opts)) != len(opts):
            problem = (opt_c, f"option {next(o for o in opts if opts.count(o) > 1)!r} given twice for this response")
        elif len(opts) < 2:
            problem = (opt_c, "only one option given for this response (need every option's probability)")
        total = float(sum(prob[i] for i in rows))
        if problem is None and abs(total - 1.0) > SUM_TOLERANCE:
            problem = (prob_c, f"the response's probabilities sum to {total:.6g}, not 1 (tolerance {SUM_TOLERANCE:g})")
        labs = {label[i] for i in rows} if label_c else {None}
        if problem is None and label_c and len(labs) != 1:
            problem = (label_c, f"the response's rows give different labels {sorted(map(str, labs))}")
        ordered = sorted(set(opts))
        lab = next(iter(labs))
        if problem is None and label_c and lab not in ordered:
            problem = (label_c, ("missing label" if lab in (None, "") else
                                 f"label {str(lab)[:40]!r} is not one of the options {', '.join(ordered)}"))
        if problem:
            for i in rows:
                why[i] = problem
            continue
        p = {option[i]: prob[i] / total for i in rows}
        first = min(rows, key=lambda i: lines[i])
        out_lines.append(int(lines[first]))
        out_probs.append([p[o] for o in ordered])
        out_labels.append(ordered.index(lab) if label_c else None)
    bad = np.zeros(n, dtype=bool)
    for i, (col, reason) in why.items():
        bad[i] = True
        rejects.append(Reject(int(lines[i]), col, reason))
    extras = pl.DataFrame({LINE: pl.Series(out_lines, dtype=pl.Int64),
                           "option_probs": pl.Series(out_probs, dtype=pl.List(pl.Float64)),
                           "label": pl.Series(out_labels, dtype=pl.Int64)})
    yield RawBatch(frame=frame.filter(pl.Series(~bad)), rejects=rejects, extras=extras)


def attach_confidence(batches: Iterator[RawBatch], col: str, score_col: str) -> Iterator[RawBatch]:
    """``--map confidence=``: (1 - c, c) over (wrong, right), the label from the 0/1 score."""
    for raw in batches:
        frame = raw.frame
        if frame.height == 0:
            yield raw
            continue
        s = frame[col]
        c = (s.str.strip_chars() if s.dtype == pl.String else s).cast(pl.Float64, strict=False).to_numpy()
        text = s.cast(pl.String).to_list()
        sc = frame[score_col]
        score = (sc.str.strip_chars().str.to_lowercase().replace({"true": "1", "false": "0"})
                 if sc.dtype == pl.String else sc).cast(pl.Float64, strict=False).to_numpy()
        lines = frame[LINE].to_numpy()
        rejects = list(raw.rejects)
        bad = np.zeros(frame.height, dtype=bool)
        for i in range(frame.height):
            why = None
            if text[i] is None or str(text[i]).strip() == "":
                why = "missing confidence"
            elif np.isnan(c[i]):
                why = f"confidence is not a number: {str(text[i])[:40]!r}"
            elif not 0.0 <= c[i] <= 1.0:
                why = f"confidence {c[i]:g} is not a probability in [0, 1]"
            elif score[i] not in (0.0, 1.0):
                why = "a confidence needs a 0/1 score (was the answer right?)"
            if why:
                bad[i] = True
                rejects.append(Reject(int(lines[i]), col, why))
        keep = ~bad
        extras = pl.DataFrame({LINE: pl.Series(lines[keep], dtype=pl.Int64),
                               "option_probs": pl.Series([[1.0 - v, v] for v in c[keep]], dtype=pl.List(pl.Float64)),
                               "label": pl.Series(score[keep].astype(np.int64), dtype=pl.Int64)})
        yield RawBatch(frame=frame.filter(pl.Series(keep)), rejects=rejects, extras=extras)
