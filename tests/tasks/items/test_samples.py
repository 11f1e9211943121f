"""Repeated samples through the store (tasks/items/samples.py): the components read from a store
whose models answered items several times, ``benchcert plan samples`` and the block of
``benchcert items``; refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchcert.stats.replicates import plan_samples, variance_components
from benchcert.tasks.items.samples import components_table, read_samples
from store_support import cli


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.ingest.service import ingest_file

    root = tmp_path_factory.mktemp("samples")
    rng = np.random.default_rng(3)
    lines = ["model,item_id,subject,replicate,score"]
    truth = {}
    for j, model in enumerate(["steady", "noisy", "mid"]):
        p = 1 / (1 + np.exp(-(rng.normal(0, 1.5, 120) + 0.3 * j)))
        if model == "steady":
            p = (p > 0.5).astype(float)   # no run-to-run noise
        truth[model] = p
        for i in range(120):
            for r in range(4):
                lines.append(f"{model},i{i},s{i % 6},{r},{int(rng.random() < p[i])}")
    csv = root / "b.csv"
    csv.write_text("\n".join(lines) + "\n")
    db = root / "s.duckdb"
    assert ingest_file(db, csv, benchmark="b", mapping=parse_mapping()).status == "ingested"
    return db, truth


def test_components_from_the_store_equal_the_stats_on_the_same_counts(store):
    db, _ = store
    samples, variant = read_samples(db, "b", None)
    assert variant == "" and samples.height == 360 and samples["r"].unique().to_list() == [4]
    table = components_table(samples, alpha=0.05, seed=0)
    assert table["model"].to_list() == ["mid", "noisy", "steady"]
    steady = table.filter(model="steady").row(0, named=True)
    assert steady["within"] == 0.0 and steady["unstable_items"] == 0 and steady["within_share"] == 0.0
    g = samples.filter(model="noisy").sort("item_id")
    codes = g["subject"].rank("dense").cast(int).to_numpy() - 1
    vc = variance_components(g["r"].to_numpy(), g["s1"].to_numpy(), g["s2"].to_numpy(), codes, n_boot=0,
                             rng=np.random.default_rng(0))
    assert table.filter(model="noisy")["within"].item() == pytest.approx(vc.within)
    assert table.filter(model="noisy")["k"].item() == 4


def test_plan_samples_command(capsys, store):
    db, _ = store
    code, out, err = cli(capsys, "plan", "samples", "--db", db, "--benchmark", "b", "--budget", "600",
                         "--cost-item", "3", "--model", "noisy", "--json")
    assert code == 0, err
    doc = json.loads(out)
    (p,) = doc["plans"]
    c = doc["components"][0]
    between = max(c["between_items"], 0) + max(c["between_subjects"] or 0, 0)
    expect = plan_samples(between, c["within"], budget=600, n_items=120, cost_item=3, cost_sample=1)
    assert (p["k"], p["n"]) == (expect.k, expect.n) and p["cost"] <= 600
    code, out, _ = cli(capsys, "plan", "samples", "--db", db, "--benchmark", "b", "--budget", "600")
    assert code == 0 and "K = " in out and "steady" in out


@pytest.mark.parametrize("argv,code,message", [
    (["--budget", "0"], 2, "--budget"),
    (["--budget", "2", "--cost-item", "5"], 2, "buys no sample"),
    (["--budget", "100", "--model", "nobody"], 1, "no repeated samples"),
])
def test_plan_samples_refusals(capsys, store, argv, code, message):
    db, _ = store
    got, _, err = cli(capsys, "plan", "samples", "--db", db, "--benchmark", "b", *argv)
    assert got == code and message in err


def test_items_shows_the_repeated_samples(capsys, store):
    db, _ = store
    code, out, err = cli(capsys, "items", "--db", db, "--benchmark", "b")
    assert code == 0, err
    assert "repeated samples" in out and "noisy:" in out and "pass@4" in out
