"""The Python API (benchcert/__init__.py, benchcert/_store.py, benchcert/_oneshot.py): every public name
documented with an example that runs, the same numbers as the command line on the same data, DataFrames of
both libraries, clear errors, escaped notebook views, and docs/python.md executed."""

from __future__ import annotations

import doctest
import json
import math

import polars as pl
import pytest

import benchcert as bc
from benchcert.flows.cli import main

from conftest import ROOT

MAPPING = {"item_id": "item", "subject": "subject", "score": "score"}


def _run_doctests(obj, name: str) -> doctest.TestResults:
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(obj, name, globs={})
    for t in tests:
        runner.run(t)
    return runner.summarize(verbose=False)


@pytest.mark.parametrize("name", bc.__all__)
def test_every_public_name_has_a_docstring_with_an_example_that_runs(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that writes a file writes it here
    obj = getattr(bc, name)
    assert obj.__doc__ and ">>>" in obj.__doc__, f"benchcert.{name} has no example in its docstring"
    result = _run_doctests(obj, f"benchcert.{name}")
    assert result.attempted > 0 and result.failed == 0


def test_all_is_what_the_module_offers():
    assert set(bc.__all__) <= set(dir(bc))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        bc.nothing  # noqa: B018


def _cli(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().out


def test_the_api_gives_the_command_lines_numbers(capsys, tmp_path):
    """The same CSV through `benchcert ingest/audit/compare --json` and through a pandas DataFrame in the API."""
    frame = bc.example_frame()
    csv = tmp_path / "toy.csv"
    frame.write_csv(csv)
    db = tmp_path / "cli.duckdb"
    code, _ = _cli(capsys, "ingest", csv, "--db", db, "--benchmark", "toy", "--in-process",
                   *[a for k, v in MAPPING.items() for a in ("--map", f"{k}={v}")])
    assert code == 0
    code, out = _cli(capsys, "audit", "--db", db, "--benchmark", "toy", "--artifacts", tmp_path / "cli-arts",
                     "--in-process", "--json")
    assert code == 0
    cli_audit = json.loads(out)
    code, out = _cli(capsys, "compare", "weak", "strong", "--db", db, "--benchmark", "toy", "--json")
    assert code == 0
    cli_compare = json.loads(out)

    store = bc.Store(tmp_path / "api" / "store.duckdb", prefect=False)
    store.ingest(frame.to_pandas(), benchmark="toy", mapping=MAPPING)
    result = store.audit("toy")
    gap = store.compare("strong", "weak", benchmark="toy")

    by_model = {m["model"]: m for m in cli_audit["models"]}
    table = result.to_polars()
    assert table["model"].to_list() == ["strong", "weak"]
    for row in table.iter_rows(named=True):
        cli = by_model[row["model"]]
        assert row["pooled"] == cli["pooled"]["estimate"] and row["macro"] == cli["macro"]["estimate"]
        assert row["headline_lower"] == cli["macro"]["headline"]["lower"]
        assert row["headline_upper"] == cli["macro"]["headline"]["upper"]
        assert (row["rank"], row["rank_lower"], row["rank_upper"]) == (cli["rank"], cli["rank_lower"],
                                                                      cli["rank_upper"])
    assert gap.as_dict()["comparisons"] == cli_compare["comparisons"]
    assert str(result).splitlines()[:4] == [line for line in _table_lines(capsys, db, tmp_path)][:4]


def _table_lines(capsys, db, tmp_path):
    code, out = _cli(capsys, "audit", "--db", db, "--benchmark", "toy", "--artifacts", tmp_path / "cli-arts2",
                     "--in-process")
    assert code == 0
    return out.splitlines()[1:]  # after the "benchmark ... models" line


def test_polars_and_pandas_frames_go_into_a_throw_away_store_and_once_only():
    frame = bc.example_frame()
    with bc.Store() as store:
        first = store.ingest(frame, benchmark="toy", mapping=MAPPING)
        again = store.ingest(frame.to_pandas(), benchmark="toy", mapping=MAPPING)
        assert first.rows_added == 400 and first.ok
        # the pandas copy is the same content: the same file name, already ingested
        assert again.rows_added == 0 and again.files[0].status == "unchanged"
        folder = store.path.parent
        assert folder.is_dir() and store.audit("toy").n_models == 2
    assert not folder.exists()  # a throw-away store is removed with it


def test_one_call_audit_keeps_its_report_readable():
    result = bc.audit(bc.example_frame(), model="model", item="item", subject="subject", score="score",
                      benchmark="toy")
    assert result.report.is_file() and result.table("model_scores").height == 2
    with pytest.raises(FileNotFoundError, match="no such table"):
        result.table("../../summary")


@pytest.mark.parametrize("call, message", [
    (lambda s: s.ingest(42, benchmark="toy"), "source must be a path"),
    (lambda s: s.ingest(bc.example_frame(), benchmark="toy", mapping=5), "mapping must be a dict"),
    (lambda s: s.ingest(bc.example_frame(), benchmark="toy", mapping={"item_id": 3}), "column names"),
    (lambda s: s.compare("a", "b", benchmark="toy", alpha=1.5), "alpha must be in"),
    (lambda s: s.audit("toy", db="other.duckdb"), "db is the Store's"),
])
def test_bad_arguments_are_value_errors_naming_them(call, message):
    with bc.Store() as store:
        with pytest.raises(ValueError, match=message):
            call(store)


def test_a_mapping_naming_no_canonical_field_is_a_usage_error():
    with bc.Store() as store:
        with pytest.raises(bc.UserError, match="unknown canonical field 'colour'") as e:
            store.ingest(bc.example_frame(), benchmark="toy", mapping={"colour": "item"})
        assert e.value.exit_code == 2


def test_auditing_an_empty_store_names_the_store():
    with bc.Store() as store:
        with pytest.raises(bc.UserError, match="no such store") as e:
            store.audit("toy")
        assert e.value.exit_code == 3
        for read in (store.runs, lambda: store.show("r1"), lambda: store.perturb("toy")):
            with pytest.raises(bc.UserError, match="no such store"):
                read()
        assert not store.path.exists()  # reading a missing store does not create an empty one


def test_notebook_views_escape_names_from_logs():
    frame = bc.example_frame().with_columns(pl.col("model").replace("weak", "<script>alert(1)</script>"))
    result = bc.audit(frame, model="model", item="item", subject="subject", score="score")
    html = result._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html and "<svg" in html and "<table" in html
    assert repr(result).startswith("<AuditResult of benchmark 'frame'")
    frame_pd = result.to_pandas()
    assert list(frame_pd["model"]) == result.to_polars()["model"].to_list()


def test_a_refused_frame_says_why_and_stores_nothing():
    frame = bc.example_frame().with_columns(score=pl.when(pl.col("item") == "q007").then(2.0)
                                            .otherwise(pl.col("score")))
    with bc.Store() as store:
        with pytest.raises(bc.IngestRefused, match="score") as e:
            store.ingest(frame, benchmark="toy", mapping=MAPPING)
        assert e.value.result.rows_added == 0 and not e.value.result.ok
        assert math.isclose(store.ingest(bc.example_frame(), benchmark="toy", mapping=MAPPING).rows_added, 400)


def test_the_python_guide_runs():
    """docs/python.md: every example is executed (doctest), on the bundled data."""
    result = doctest.testfile(str(ROOT / "docs" / "python.md"), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 10 and result.failed == 0
