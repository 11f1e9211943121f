"""End to end on lm-evaluation-harness option probabilities: ingest -> ``benchcert gof`` -> audit section.

The bundled real lm-evaluation-harness fixture (tests/data/native/lm_eval) is a generation task
without option log-likelihoods, so the multiple-choice logs here are written by
:func:`write_mc_run` in the exact v0.4.3+ ``--log_samples`` layout the adapter reads (the same
layout as tests/tasks/ingest/test_adapters_native.py's MMLU generator): three MMLU subtasks of 100 items,
each item with true option probabilities drawn from a Dirichlet law and its correct option
drawn from them.  Two models answer the same items: ``org/calibrated`` logs the true
probabilities' logarithms; ``org/overconfident`` logs three times them (probabilities
sharpened by a power of 3).  Known truth: the first fits exactly, the second does not.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from benchcert.flows.cli import main
from benchcert.stats.gof import MIN_ITEMS
from benchcert.tasks.ingest.service import ingest_file
from benchcert.tasks.ingest.mapping import ColumnMapping
from benchcert.tasks.store.connection import open_store, query_pl

from mc_logs_support import truth, write_mc_run


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("gof")
    items = truth(np.random.default_rng(17), 100)
    db = root / "s.duckdb"
    for model, power in (("org/calibrated", 1.0), ("org/overconfident", 3.0)):
        out = write_mc_run(root / "logs", model, items, power)
        for f in sorted(out.glob("samples_*.jsonl")):
            r = ingest_file(db, f, benchmark=None, mapping=ColumnMapping())
            assert r.status == "ingested", r.message
    return {"db": db, "root": root, "items": items}


def cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def test_ingest_keeps_probabilities_and_the_correct_option(store):
    with open_store(store["db"], write=False) as con:
        rows = query_pl(con, "SELECT model, item_id, probs, label FROM option_probs ORDER BY model, item_id")
    assert rows.height == 600 and rows["label"].null_count() == 0
    for model, item_id, probs, label in rows.filter(rows["model"] == "org/calibrated").iter_rows():
        task, doc = item_id.split("/")
        p, gold = store["items"][task][int(doc)]
        assert label == gold
        np.testing.assert_allclose(probs, p, rtol=1e-9)


def test_gof_command_separates_the_calibrated_from_the_overconfident_model(store):
    code, out, err = cli("gof", "--db", store["db"], "--benchmark", "mmlu", "--json", "--seed", "3")
    assert code == 0, err
    res = {r["model"]: r for r in json.loads(out)["models"]}
    good, bad = res["org/calibrated"], res["org/overconfident"]
    for r in (good, bad):
        assert r["n"] == 300 and r["n_options"] == 4 and r["method"] == "split"
        for key in ("statistic", "sigma", "delta_min", "reject", "brier", "log_loss", "ece"):
            assert r[key] is not None, key
    # known truth: exact fit vs probabilities sharpened by a power of 3
    assert not good["reject"] and bad["reject"] and bad["delta_min"] > 0.02
    assert bad["ece"] > 2 * good["ece"] and bad["log_loss"] > good["log_loss"]
    # the same seed gives the same answer; crossfit and another distinguisher run too
    code, again, _ = cli("gof", "--db", store["db"], "--benchmark", "mmlu", "--json", "--seed", "3")
    assert json.loads(again) == json.loads(out)
    code, out, _ = cli("gof", "--db", store["db"], "--benchmark", "mmlu", "--model", "org/overconfident",
                       "--method", "crossfit", "--distinguisher", "gbm", "--delta", "0.01", "--json")
    (r,) = json.loads(out)["models"]
    assert code == 0 and r["folds"] == 5 and r["n_eval"] == 300 and "cross-fit" in r["note"]
    code, out, _ = cli("gof", "--db", store["db"], "--benchmark", "mmlu", "--model", "org/overconfident",
                       "--method", "crossfit", "--null-draws", "19", "--json")
    (r,) = json.loads(out)["models"]
    assert code == 0 and r["null_draws"] == 19 and r["reject"] and r["note"] is None
    code, _, err = cli("gof", "--db", store["db"], "--benchmark", "mmlu", "--null-draws", "5")
    assert code == 2 and "at least 19" in err
    code, text, _ = cli("gof", "--db", store["db"], "--benchmark", "mmlu")
    assert code == 0 and "org/overconfident" in text and "delta_min" in text


def test_gof_command_refuses_what_it_cannot_answer(store, tmp_path):
    code, _, err = cli("gof", "--db", store["db"], "--benchmark", "nope")
    assert code == 1 and "unknown benchmark 'nope'" in err
    code, _, err = cli("gof", "--db", store["db"], "--benchmark", "mmlu", "--model", "org/ghost")
    assert code == 1 and "org/ghost" in err
    code, _, err = cli("gof", "--db", store["db"], "--benchmark", "mmlu", "--alpha", "1.5")
    assert code == 2
    code, _, err = cli("gof", "--db", tmp_path / "none.duckdb", "--benchmark", "mmlu")
    assert code == 3
    # fewer items than the documented minimum: calibration numbers, no test result, and the reason
    small = tmp_path / "small.duckdb"
    out = write_mc_run(tmp_path / "logs", "org/small", truth(np.random.default_rng(1), 60), 1.0)
    for f in sorted(out.glob("samples_*.jsonl"))[:2]:
        assert ingest_file(small, f, benchmark=None, mapping=ColumnMapping()).status == "ingested"
    code, text, _ = cli("gof", "--db", small, "--benchmark", "mmlu", "--json")
    (r,) = json.loads(text)["models"]
    assert code == 0 and r["n"] == 120 and r["delta_min"] is None and r["reject"] is None
    assert f"at least {MIN_ITEMS} items; got 120" in r["note"] and r["brier"] is not None


@pytest.mark.usefixtures("prefect_harness")
def test_audit_writes_the_calibration_table_and_report_section(store):
    arts = store["root"] / "artifacts"
    code, out, err = cli("audit", "--db", store["db"], "--benchmark", "mmlu", "--artifacts", arts, "--json")
    assert code == 0, err
    run_dir = Path(json.loads(out)["run_dir"])
    import polars as pl

    table = pl.read_parquet(run_dir / "tables" / "calibration.parquet")
    assert sorted(table["model"]) == ["org/calibrated", "org/overconfident"]
    assert table.filter(pl.col("model") == "org/overconfident")["gof_reject"].item() is True
    bins = pl.read_parquet(run_dir / "tables" / "calibration_bins.parquet")
    assert bins.group_by("model").agg(pl.col("count").sum())["count"].to_list() == [300, 300]
    html = (run_dir / "report.html").read_text()
    assert "Calibration and goodness of fit" in html and '<svg class="reliability"' in html
    assert html.count('class="panel"') == 2


def test_a_store_from_before_labels_is_upgraded_and_says_what_is_missing(tmp_path):
    # option_probs as an earlier benchcert wrote it: no label column
    from benchcert.tasks.store import schema

    items = truth(np.random.default_rng(2), 100)
    out = write_mc_run(tmp_path / "logs", "org/old", items, 1.0)
    files = sorted(out.glob("samples_*.jsonl"))
    db = tmp_path / "old.duckdb"
    assert ingest_file(db, files[0], benchmark=None, mapping=ColumnMapping()).status == "ingested"
    with open_store(db, write=True) as con:
        con.execute("ALTER TABLE option_probs DROP COLUMN label")
    code, _, err = cli("gof", "--db", db, "--benchmark", "mmlu")
    assert code == 1 and "no item has a known correct option" in err
    # the next ingest adds the column; old rows keep NULL, new rows have their label
    assert ingest_file(db, files[1], benchmark=None, mapping=ColumnMapping()).status == "ingested"
    with open_store(db, write=False) as con:
        labels = query_pl(con, "SELECT item_id, label FROM option_probs ORDER BY item_id")
    assert labels.height == 200 and labels["label"].null_count() == 100
    code, out, _ = cli("gof", "--db", db, "--benchmark", "mmlu", "--json")
    (r,) = json.loads(out)["models"]
    assert code == 0 and r["n"] == 100 and r["n_unlabelled"] == 100 and "100 item(s) without" in r["note"]
    assert r["delta_min"] is None and "at least 200 items" in r["note"]
    assert schema.COLUMN_MIGRATIONS["option_probs"][0].startswith("ALTER TABLE option_probs ADD COLUMN IF NOT EXISTS")


def test_gof_command_chooses_and_reports_the_crossfit_variance(store):
    # review finding 5: gof_test's crossfit_variance is a flag of the command, and the JSON names the variance
    base = ("gof", "--db", store["db"], "--benchmark", "mmlu", "--model", "org/calibrated", "--json", "--seed", "4")
    code, out, err = cli(*base)
    assert code == 0, err
    assert json.loads(out)["models"][0]["variance"] == "(13)"  # split: the paper's (13)
    code, out, err = cli(*base, "--method", "crossfit")
    assert code == 0, err
    (adj,) = json.loads(out)["models"]
    code, out, err = cli(*base, "--method", "crossfit", "--crossfit-variance", "paper")
    assert code == 0, err
    (paper,) = json.loads(out)["models"]
    assert (adj["variance"], paper["variance"]) == ("2 x (14)", "(14)")
    # the same folds and statistic; only the variance differs, by the factor 2
    assert paper["statistic"] == adj["statistic"] and adj["sigma"] == pytest.approx(paper["sigma"] * 2 ** 0.5)
    assert "does NOT hold its level" in paper["note"] and "does NOT" not in adj["note"]
    code, out, err = cli(*base, "--method", "crossfit", "--crossfit-variance", "adjusted")
    assert code == 0 and json.loads(out)["models"][0] == adj
    code, _, err = cli(*base, "--crossfit-variance", "paper")
    assert code == 2 and "--method crossfit only" in err
    code, text, err = cli(*base[:-3], "--method", "crossfit", "--crossfit-variance", "paper")
    assert code == 0 and "variance (14)" in text
