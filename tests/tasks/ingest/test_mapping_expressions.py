"""Mapping expressions: a mapped field may be a SQL expression over the file's columns
(polars.sql_expr), in --map flags and in the TOML mapping file; plain column names keep working."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from benchcert.tasks.store.connection import open_store, query_pl

from store_support import cli

PREF = ("exam,problem_id,model,preference,my col\n"
        "math,007,m1,1.5,a\n"
        "math,12,m1,2,b\n"
        "bio,3,m2,1,c\n")
EXPRESSIONS = ["score=preference - 1", "item_id=exam || '/' || problem_id", "benchmark='alpaca_eval_2'",
               "subject=exam"]


def _rows(db) -> list[tuple]:
    with open_store(db, write=False) as con:
        r = query_pl(con, "SELECT r.benchmark, r.model, r.item_id, r.score, i.subject FROM responses r "
                          "JOIN items i USING (benchmark, item_id) ORDER BY r.item_id")
    return [tuple(x) for x in r.iter_rows()]


EXPECTED = [("alpaca_eval_2", "m2", "bio/3", 0.0, "bio"), ("alpaca_eval_2", "m1", "math/007", 0.5, "math"),
            ("alpaca_eval_2", "m1", "math/12", 1.0, "math")]


def test_arithmetic_concatenation_and_constant_in_flags(capsys, tmp_path):
    src = tmp_path / "pref.csv"
    src.write_text(PREF)
    db = tmp_path / "s.duckdb"
    maps = [a for m in EXPRESSIONS for a in ("--map", m)]
    code, out, err = cli(capsys, "ingest", src, "--db", db, *maps, "--json")
    assert code == 0, err
    # "007" stays "007": text columns are concatenated as text, only arithmetic reads numbers.
    assert _rows(db) == EXPECTED
    code, out, _ = cli(capsys, "ingest", src, "--db", db, *maps, "--json")
    assert code == 0 and json.loads(out)["files"][0]["status"] == "unchanged"


def test_the_same_mapping_in_a_toml_file(capsys, tmp_path):
    src = tmp_path / "pref.csv"
    src.write_text(PREF)
    toml = tmp_path / "mapping.toml"
    toml.write_text('[map]\nscore = "preference - 1"\nitem_id = "exam || \'/\' || problem_id"\n'
                    'benchmark = "\'alpaca_eval_2\'"\nsubject = "exam"\n')
    db = tmp_path / "s.duckdb"
    code, _, err = cli(capsys, "ingest", src, "--db", db, "--config", toml)
    assert code == 0, err
    assert _rows(db) == EXPECTED


def test_plain_column_names_keep_working_whatever_they_hold(capsys, tmp_path):
    src = tmp_path / "pref.csv"
    src.write_text(PREF.replace("preference", "score (0-2)"))
    db = tmp_path / "s.duckdb"
    # "my col" and "score (0-2)" are columns of the file, so they are read as columns, not parsed.
    code, _, err = cli(capsys, "ingest", src, "--db", db, "--benchmark", "b", "--map", "item_id=problem_id",
                       "--map", "subject=my col", "--map", 'score="score (0-2)" / 2')
    assert code == 0, err
    with open_store(db, write=False) as con:
        subjects = sorted(r[0] for r in con.execute("SELECT subject FROM items").fetchall())
        scores = sorted(r[0] for r in con.execute("SELECT score FROM responses").fetchall())
    assert subjects == ["a", "b", "c"] and scores == [0.5, 0.75, 1.0]


def test_numbers_in_parquet_and_a_bad_value_in_a_row(capsys, tmp_path):
    pq = tmp_path / "p.parquet"
    pl.DataFrame({"m": ["x", "x"], "q": [1, 2], "raw": [3.0, 1.0]}).write_parquet(pq)
    db = tmp_path / "s.duckdb"
    code, _, err = cli(capsys, "ingest", pq, "--db", db, "--benchmark", "b", "--map", "model=m",
                       "--map", "item_id=q", "--map", "score=(raw - 1) / 2")
    assert code == 0, err
    with open_store(db, write=False) as con:
        assert sorted(r[0] for r in con.execute("SELECT score FROM responses").fetchall()) == [0.0, 1.0]
    bad = tmp_path / "bad.csv"
    bad.write_text(PREF + "bio,4,m2,n/a,d\n")
    code, out, _ = cli(capsys, "ingest", bad, "--db", tmp_path / "t.duckdb", "--map", EXPRESSIONS[0],
                       "--map", "item_id=problem_id", "--benchmark", "b", "--json")
    (f,) = json.loads(out)["files"]
    assert code == 1 and f["status"] == "rejected" and f["rejects"][0]["line"] == 5
    assert f["rejects"][0]["field"] == "preference - 1 (score)"


@pytest.mark.parametrize("bad, names", [
    ("score=preference -", "preference -"),            # does not parse
    ("item_id=exam || '/", "unterminated string"),     # an open quote
    ("score=nosuch(preference)", "nosuch"),            # an unknown function
    ("score=prefrence - 1", "'prefrence'"),            # a column the file lacks
])
def test_a_bad_expression_is_a_usage_error_naming_it(capsys, tmp_path, bad, names):
    src = tmp_path / "pref.csv"
    src.write_text(PREF)
    db = tmp_path / "s.duckdb"
    code, _, err = cli(capsys, "ingest", src, "--db", db, "--benchmark", "b", "--map", "item_id=problem_id",
                       "--map", bad)
    assert code == 2 and names in err and len(err.strip().splitlines()) == 1, err
    assert not db.exists()  # nothing was read or stored
    toml = tmp_path / "m.toml"
    key, value = bad.split("=", 1)
    toml.write_text(f"[map]\n{key} = {json.dumps(value)}\n" + ("" if key == "item_id" else 'item_id = "problem_id"\n'))
    code, _, err = cli(capsys, "ingest", src, "--db", db, "--benchmark", "b", "--config", toml)
    assert code == 2 and names in err, err


def test_every_wrong_mapping_is_reported_at_once_with_exit_2_plain_or_in_an_expression(capsys, tmp_path):
    """Issue #26 finding 14: a wrong plain column exited 1 (per file), one inside an expression 2,
    and only the first wrong mapping was named."""
    src = tmp_path / "pref.csv"
    src.write_text(PREF)
    db = tmp_path / "s.duckdb"
    code, _, err = cli(capsys, "ingest", src, "--db", db, "--benchmark", "b", "--map", "item_id=problemid",
                       "--map", "score=prefrence - 1", "--map", "subject=exm")
    assert code == 2, err
    assert "3 wrong mappings" in err and "'problemid'" in err and "'prefrence'" in err and "'exm'" in err
    assert len(err.strip().splitlines()) == 1
    assert not db.exists()


def _function_table() -> list[tuple[str, str]]:
    """(example, result) of each row of docs/cli.md's table of SQL functions."""
    from conftest import TESTS

    text = (TESTS.parent / "docs" / "cli.md").read_text()
    start = text.index("| Function | Example | Result |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip("|"))]
        rows.append((cells[1].strip("`"), cells[2][1:-1]))
    return rows


def test_the_documented_sql_functions_work_as_the_table_says():
    """Issue #26 finding 6: which SQL functions work is documented (docs/cli.md), date/time parsing included."""
    import polars as pl

    from benchcert.tasks.ingest.mapping import evaluate

    rows = _function_table()
    assert len(rows) >= 15 and any("to_timestamp" in e for e, _ in rows)
    frame = pl.DataFrame({"t": ["2024-06-01 10:30:00"], "x": [" Ab c "], "n": [1.26]})
    for example, result in rows:
        got = evaluate(frame, {"score": example})[example][0]
        assert str(got) == result, (example, got, result)
