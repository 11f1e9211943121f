"""Option probabilities from CSV/JSONL/Parquet (``--map prob_<option>=COLUMN``, ``--map label=COLUMN``).

Every file here is written by the test; the expected stored values are the file's own numbers.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.ingest.mapping import MappingError, parse_mapping
from benchcert.tasks.store.connection import open_store, query_pl

MAP = ["model=m", "item_id=q", "score=correct", "prob_A=pA", "prob_B=pB", "prob_C=pC", "label=gold"]


def table(n=6, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(3), size=n)
    gold = rng.integers(0, 3, n)
    return pl.DataFrame({"m": "mod", "q": [f"q{i}" for i in range(n)],
                         "correct": (p.argmax(1) == gold).astype(float),
                         "pA": p[:, 0], "pB": p[:, 1], "pC": p[:, 2], "gold": [["A", "B", "C"][g] for g in gold]})


def stored(db):
    with open_store(db, write=False) as con:
        return query_pl(con, "SELECT item_id, probs, label FROM option_probs ORDER BY item_id")


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_probability_columns_are_stored_with_the_correct_option(tmp_path, fmt):
    df = table()
    path = tmp_path / f"probs.{fmt}"
    {"csv": df.write_csv, "jsonl": df.write_ndjson, "parquet": df.write_parquet}[fmt](path)
    db = tmp_path / "s.duckdb"
    r = ingest_file(db, path, benchmark="b", mapping=parse_mapping(MAP))
    assert r.status == "ingested" and r.rows_added == 6, r.message
    got = stored(db)
    assert got["item_id"].to_list() == df["q"].to_list()
    np.testing.assert_allclose(np.array(got["probs"].to_list()), df.select("pA", "pB", "pC").to_numpy(), rtol=1e-9)
    assert got["label"].to_list() == [["A", "B", "C"].index(g) for g in df["gold"]]


def test_without_a_label_the_probabilities_are_kept_and_the_label_is_unknown(tmp_path):
    path = tmp_path / "p.csv"
    table().write_csv(path)
    db = tmp_path / "s.duckdb"
    r = ingest_file(db, path, benchmark="b", mapping=parse_mapping(MAP[:-1]))
    assert r.status == "ingested", r.message
    assert stored(db)["label"].null_count() == 6


BAD_ROWS = [
    ("pA", "-0.1", "negative probability"),
    ("pB", "NaN", "not a number"),
    ("pC", "inf", "not finite"),
    ("pA", "", "missing probability"),
    ("pB", "abc", "not a number: 'abc'"),
    ("pA", "0.05", "sum to"),
    ("gold", "E", "label 'E' is not one of the options A, B, C"),
]


@pytest.mark.parametrize("column, value, fragment", BAD_ROWS)
def test_bad_probabilities_refuse_the_file_with_file_line_and_field(tmp_path, column, value, fragment):
    df = table().with_columns(pl.col(c).cast(pl.String) for c in ("pA", "pB", "pC"))
    df = df.with_columns(pl.when(pl.int_range(pl.len()) == 3).then(pl.lit(value)).otherwise(pl.col(column))
                         .alias(column))
    path = tmp_path / "bad.csv"
    df.write_csv(path)
    db = tmp_path / "s.duckdb"
    good = tmp_path / "good.csv"
    table(seed=5).with_columns(pl.col("q") + "x").write_csv(good)
    assert ingest_file(db, good, benchmark="b", mapping=parse_mapping(MAP)).status == "ingested"
    before = stored(db)
    r = ingest_file(db, path, benchmark="b", mapping=parse_mapping(MAP))
    assert r.status == "rejected", r.message
    (rej,) = r.rejects
    assert rej["line"] == 5 and fragment in rej["reason"]  # row 3 of the data = line 5 (header is line 1)
    assert (column if column != "pA" or "sum" not in fragment else "pA") in rej["field"]
    assert str(path) in r.message
    assert stored(db).equals(before)  # nothing from the refused file
    # --allow-rejects keeps the other rows and their probabilities
    r = ingest_file(db, path, benchmark="b", mapping=parse_mapping(MAP), allow_rejects=True)
    assert r.status == "ingested" and r.rows_added == 5
    assert "q3" not in stored(db)["item_id"].to_list()


def test_mapping_errors_are_clear(tmp_path):
    with pytest.raises(MappingError, match="unknown canonical field 'probability'"):
        parse_mapping(["probability=p"])
    path = tmp_path / "p.csv"
    table().write_csv(path)
    db = tmp_path / "s.duckdb"
    r = ingest_file(db, path, benchmark="b", mapping=parse_mapping(["model=m", "item_id=q", "score=correct",
                                                                    "label=gold"]))
    assert r.status == "error" and "--map prob_<option>=COLUMN" in r.message
    r = ingest_file(db, path, benchmark="b", mapping=parse_mapping(["model=m", "item_id=q", "score=correct",
                                                                    "prob_A=pA"]))
    assert r.status == "error" and "at least two" in r.message
    r = ingest_file(db, path, benchmark="b", mapping=parse_mapping([*MAP[:3], "prob_A=pA", "prob_B=nope"]))
    assert r.status == "error" and "prob_B" in r.message and "'nope'" in r.message


def test_reingesting_with_another_probability_mapping_is_a_new_source(tmp_path):
    path = tmp_path / "p.csv"
    table().write_csv(path)
    db = tmp_path / "s.duckdb"
    assert ingest_file(db, path, benchmark="b", mapping=parse_mapping(MAP[:3])).status == "ingested"
    assert ingest_file(db, path, benchmark="b", mapping=parse_mapping(MAP[:3])).status == "unchanged"
    r = ingest_file(db, path, benchmark="b", mapping=parse_mapping(MAP))
    assert r.status == "ingested" and r.rows_added == 0
    # responses already stored get the probabilities the new file gives them
    assert stored(db).height == 6 and stored(db)["label"].null_count() == 0
    # and a third ingest of other probabilities for the same responses keeps the first ones
    other = tmp_path / "other.csv"
    table(seed=9).with_columns(pl.col("m"), pl.col("q"), correct=table()["correct"]).write_csv(other)
    before = stored(db)
    assert ingest_file(db, other, benchmark="b", mapping=parse_mapping(MAP)).status == "ingested"
    assert stored(db).equals(before)
    json.dumps(r.as_dict())


# --------------------------------------------------------------------------------------
# inspect_ai logs whose answer token carries logprobs


INSPECT_ARC = __import__("pathlib").Path(__file__).resolve().parents[2] / "data" / "native" / "inspect_ai" / "data_arc_qwen.json"


def _with_logprobs(sample, top):
    """The real sample with the logprobs inspect_ai records when asked (answer token 'A' after 'ANSWER:')."""
    toks = [{"token": "ANSWER", "logprob": -0.01, "top_logprobs": []},
            {"token": ":", "logprob": -0.01, "top_logprobs": []},
            {"token": " A", "logprob": top[0][1], "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}]
    sample["output"]["choices"][0]["logprobs"] = {"content": toks}
    return sample


def test_inspect_ai_answer_token_logprobs_become_option_probabilities(tmp_path):
    log = json.loads(INSPECT_ARC.read_text())
    tops = [[(" A", -0.2), (" B", -2.0), (" C", -3.0), ("D", -4.0)],
            [(" A", -0.1), (" B", -2.5), ("\n", -3.0)],   # C and D outside the top alternatives: probability 0
            None]                                          # the third sample keeps no logprobs
    for s, top in zip(log["samples"], tops):
        if top:
            _with_logprobs(s, top)
    path = tmp_path / "arc_logprobs.json"
    path.write_text(json.dumps(log))
    db = tmp_path / "s.duckdb"
    from benchcert.tasks.ingest.mapping import ColumnMapping

    r = ingest_file(db, path, benchmark=None, mapping=ColumnMapping())
    assert r.status == "ingested", r.message
    got = {k: (p, lab) for k, p, lab in stored(db).iter_rows()}
    assert set(got) == {"1", "2"}
    e = np.exp([-0.2, -2.0, -3.0, -4.0])
    np.testing.assert_allclose(got["1"][0], e / e.sum(), rtol=1e-12)
    e = np.exp([-0.1, -2.5])
    np.testing.assert_allclose(got["2"][0], [*(e / e.sum()), 0.0, 0.0], rtol=1e-12)
    assert got["1"][1] == 0 and got["2"][1] == 1  # targets A and B


# --------------------------------------------------------------------------------------
# long form: one row per option (--map option=COLUMN --map prob=COLUMN)

LONG_MAP = ["model=m", "item_id=q", "score=correct", "option=opt", "prob=p", "label=gold"]


def long_table(n=5, seed=0):
    wide = table(n, seed)
    return (wide.unpivot(index=["m", "q", "correct", "gold"], on=["pA", "pB", "pC"], variable_name="opt",
                         value_name="p")
            .with_columns(pl.col("opt").str.slice(1)).sort("q", "opt", descending=[False, True])), wide


def test_long_form_rows_are_gathered_per_response(tmp_path):
    long, wide = long_table()
    path = tmp_path / "long.csv"
    long.write_csv(path)
    db = tmp_path / "s.duckdb"
    r = ingest_file(db, path, benchmark="b", mapping=parse_mapping(LONG_MAP))
    assert r.status == "ingested" and r.rows_added == 5 and r.duplicate_rows_in_file == 10, r.message
    got = stored(db)
    np.testing.assert_allclose(np.array(got["probs"].to_list()), wide.select("pA", "pB", "pC").to_numpy(),
                               rtol=1e-9)  # options ordered by name whatever the row order
    assert got["label"].to_list() == [["A", "B", "C"].index(g) for g in wide["gold"]]


@pytest.mark.parametrize("change, fragment, n_lines", [
    (lambda d: d.with_columns(pl.when(pl.int_range(pl.len()) == 4).then(pl.lit(-0.2)).otherwise(pl.col("p"))
                              .alias("p")), "negative probability", 3),
    (lambda d: d.with_columns(pl.when(pl.int_range(pl.len()) == 4).then(pl.lit(0.99)).otherwise(pl.col("p"))
                              .alias("p")), "sum to", 3),
    (lambda d: d.with_columns(pl.when(pl.int_range(pl.len()) == 4).then(pl.lit("A")).otherwise(pl.col("opt"))
                              .alias("opt")), "given twice", 3),
    (lambda d: d.with_columns(pl.when(pl.int_range(pl.len()) == 4).then(pl.lit("Z")).otherwise(pl.col("gold"))
                              .alias("gold")), "different labels", 3),
])
def test_long_form_bad_responses_are_refused_with_their_lines(tmp_path, change, fragment, n_lines):
    long, _ = long_table()
    path = tmp_path / "long.csv"
    change(long).write_csv(path)
    db = tmp_path / "s.duckdb"
    r = ingest_file(db, path, benchmark="b", mapping=parse_mapping(LONG_MAP))
    assert r.status == "rejected", r.message
    lines = sorted({x["line"] for x in r.rejects})
    assert lines == [5, 6, 7][:n_lines]  # the three rows of the second response (data rows 3-5)
    assert any(fragment in x["reason"] for x in r.rejects), r.rejects
    r = ingest_file(db, path, benchmark="b", mapping=parse_mapping(LONG_MAP), allow_rejects=True)
    assert r.status == "ingested" and r.rows_added == 4
    assert stored(db).height == 4


def test_long_and_wide_forms_cannot_be_mixed(tmp_path):
    path = tmp_path / "p.csv"
    table().write_csv(path)
    r = ingest_file(tmp_path / "s.duckdb", path, benchmark="b",
                    mapping=parse_mapping(["model=m", "item_id=q", "score=correct", "option=gold", "prob_A=pA"]))
    assert r.status == "error" and "not both" in r.message
    r = ingest_file(tmp_path / "s.duckdb", path, benchmark="b",
                    mapping=parse_mapping(["model=m", "item_id=q", "score=correct", "option=gold"]))
    assert r.status == "error" and "needs both" in r.message


# --------------------------------------------------------------------------------------
# only the model's confidence in its own answer (--map confidence=COLUMN)


def test_confidence_of_the_given_answer_becomes_a_two_option_vector(tmp_path):
    df = pl.DataFrame({"m": "mod", "q": ["a", "b", "c"], "correct": [1, 0, 1], "conf": [0.9, 0.6, 0.75]})
    path = tmp_path / "c.csv"
    df.write_csv(path)
    db = tmp_path / "s.duckdb"
    mp = parse_mapping(["model=m", "item_id=q", "score=correct", "confidence=conf"])
    r = ingest_file(db, path, benchmark="b", mapping=mp)
    assert r.status == "ingested", r.message
    got = stored(db)
    np.testing.assert_allclose(np.array(got["probs"].to_list()), [[0.1, 0.9], [0.4, 0.6], [0.25, 0.75]])
    assert got["label"].to_list() == [1, 0, 1]
    bad = tmp_path / "bad.csv"
    pl.DataFrame({"m": "mod", "q": ["a", "b", "c"], "correct": [1, 0.5, 1], "conf": [1.2, 0.6, "x"]},
                 strict=False).write_csv(bad)
    r = ingest_file(tmp_path / "t.duckdb", bad, benchmark="b", mapping=mp)
    assert r.status == "rejected"
    reasons = {x["line"]: x["reason"] for x in r.rejects}
    assert "not a probability in [0, 1]" in reasons[2] and "0/1 score" in reasons[3] and "not a number" in reasons[4]
    r = ingest_file(tmp_path / "t.duckdb", path, benchmark="b",
                    mapping=parse_mapping(["model=m", "item_id=q", "score=correct", "confidence=conf", "label=q"]))
    assert r.status == "error" and "cannot be combined" in r.message
