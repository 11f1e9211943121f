"""The column-wise validator agrees with the pydantic canonical row, row by row (oracle test)."""

from __future__ import annotations

import numpy as np
import polars as pl
from pydantic import ValidationError

from benchcert.tasks.ingest.adapters.generic import LINE
from benchcert.tasks.schemas import ResponseRow
from benchcert.tasks.ingest.validate import validate_batch

MODELS = ["m1", "", "  ", None, "org/model@step-1"]
ITEMS = ["q1", "", None, "42"]
SCORES = ["0", "1", "0.5", "1.0", "-0.0", "1.5", "-1", "abc", "", None, "NaN", "true", "False", "1e-3", "inf"]
REPS = ["0", "3", "-1", "1.5", "x", "", None, "2.0"]


def _pydantic_ok(row: dict) -> bool:
    def to_score(s):
        if s is None or not s.strip():
            raise ValueError
        low = s.strip().lower()
        return 1.0 if low == "true" else 0.0 if low == "false" else float(s)

    def to_rep(s):
        if s is None or not s.strip():
            raise ValueError
        f = float(s)
        if f != int(f):
            raise ValueError
        return int(f)

    try:
        ResponseRow(benchmark="b", model=(row["model"] or "").strip(), item_id=(row["item"] or "").strip(),
                    score=to_score(row["score"]), replicate=to_rep(row["rep"]))
    except (ValidationError, ValueError, OverflowError):
        return False
    return True


def test_vectorized_validator_matches_pydantic_on_random_rows():
    rng = np.random.default_rng(20261126)
    n = 3000
    rows = {
        "model": [MODELS[i] for i in rng.integers(0, len(MODELS), n)],
        "item": [ITEMS[i] for i in rng.integers(0, len(ITEMS), n)],
        "score": [SCORES[i] for i in rng.integers(0, len(SCORES), n)],
        "rep": [REPS[i] for i in rng.integers(0, len(REPS), n)],
    }
    frame = pl.DataFrame(rows, schema={k: pl.String for k in rows}).with_columns(
        pl.int_range(1, n + 1, dtype=pl.Int64).alias(LINE))
    cols = {"benchmark": None, "model": "model", "item_id": "item", "subject": None, "domain": None,
            "score": "score", "variant": None, "replicate": "rep"}
    good, bad = validate_batch(frame, cols, benchmark="b")
    expected_ok = [_pydantic_ok(r) for r in frame.to_dicts()]
    got_ok = set(good["line"].to_list())
    assert [i + 1 in got_ok for i in range(n)] == expected_ok
    assert set(bad["line"].to_list()) == {i + 1 for i in range(n) if not expected_ok[i]}
    assert 0.02 < np.mean(expected_ok) < 0.5  # the random mix exercises both outcomes (~4% valid)


def test_numeric_and_boolean_columns_are_validated_natively():
    frame = pl.DataFrame({"m": ["a", "a", "a"], "i": [1, 2, 3], "s": [True, False, None],
                          LINE: [1, 2, 3]})
    cols = {"benchmark": None, "model": "m", "item_id": "i", "subject": None, "domain": None,
            "score": "s", "variant": None, "replicate": None}
    good, bad = validate_batch(frame, cols, benchmark="b")
    # An integer id stays an integer; its canonical text is the decimal form.
    assert good["score"].to_list() == [1.0, 0.0] and good["item_id"].cast(pl.String).to_list() == ["1", "2"]
    assert bad.row(0, named=True) == {"line": 3, "field": "s", "reason": "missing value"}
