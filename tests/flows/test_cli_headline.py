"""The audit table and `show` (flows/cli/audit.py summary_table): the headline with its question in the
header, the new-subjects interval and its sentence beside a same-subjects headline, items with no score,
ranks and tied groups; `benchcert schema summary` lists the new fields."""

from __future__ import annotations

import json

from benchcert.flows.cli.audit import summary_table
from benchcert.tasks.hierarchical import analysis as H
from benchcert.tasks.audit import scores as scores_analysis
from benchcert.tasks.audit.analyses import run_analysis
from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.audit.results import build_summary
from benchcert.tasks.compare import analysis as comparisons

from conftest import SMALL_CSV, SMALL_MAP

from headline_support import code_benchmark
from store_support import cli


def _code_summary() -> dict:
    m = code_benchmark()
    cfg = AuditConfig(hierarchy=("subject",))
    outputs = [run_analysis(name, fn, m, cfg) for name, fn in (
        ("scores", scores_analysis.analyze), ("hierarchical", H.analyze), ("comparisons", comparisons.analyze))]
    return json.loads(build_summary(run_id="r", created_at="t", matrices=m, config=cfg,
                                    outputs=outputs).model_dump_json())


def test_table_headlines_the_same_subjects_interval_with_the_sentence():
    summary = _code_summary()
    text = summary_table(summary)
    head = text.splitlines()[0]
    assert "macro 95%, these subjects" in head and "new subj ±" in head and "no score" in head and "rank" in head
    assert "hierarchical" not in head
    assert "headline: these subjects, because with 3 subjects, generalisation to new subjects cannot be bounded " \
           "more tightly than ±" in text
    best = max(summary["models"], key=lambda m: m["macro"]["estimate"])
    row = next(line for line in text.splitlines() if line.startswith(best["model"] + " "))
    h = best["macro"]["headline"]
    assert f"[{100 * h['lower']:5.1f}, {100 * h['upper']:5.1f}]" in row
    assert f"{100 * h['beside']['half_width']:.2f}" in row
    assert f"{best['rank']} [{best['rank_lower']}-{best['rank_upper']}]" in row


def test_table_of_a_run_before_the_headline_shows_its_hierarchical_interval():
    summary = _code_summary()
    for m in summary["models"]:  # as summary.json 1.1 had it
        for metric in ("macro", "pooled"):
            m[metric].pop("headline")
        for k in ("n_unscored", "rank", "rank_lower", "rank_upper", "tied_groups"):
            m.pop(k)
    text = summary_table(summary)
    assert "macro 95%, new subjects" in text.splitlines()[0] and "iid ±" in text.splitlines()[0]
    m = max(summary["models"], key=lambda m: m["macro"]["estimate"])
    hi = next(i for i in m["macro"]["intervals"] if i["method"] == "hierarchical")
    row = next(line for line in text.splitlines() if line.startswith(m["model"] + " "))
    assert f"[{100 * hi['lower']:5.1f}, {100 * hi['upper']:5.1f}]" in row
    assert "because" not in text and "rank:" not in text


def test_audit_and_show_print_ranks_and_the_headline(capsys, tmp_path):
    db, arts = tmp_path / "s.duckdb", tmp_path / "arts"
    code, _, err = cli(capsys, "ingest", SMALL_CSV, "--db", db, "--benchmark", "small",
                       *[a for m in SMALL_MAP for a in ("--map", m)])
    assert code == 0, err
    code, out, err = cli(capsys, "audit", "--db", db, "--benchmark", "small", "--artifacts", arts)
    assert code == 0, err
    run_id = next(line.split()[1] for line in out.splitlines() if line.startswith("run "))
    assert "rank [95%] tied" in out and "no score" in out
    code, shown, err = cli(capsys, "show", run_id, "--db", db)
    assert code == 0, err
    table = out[out.index("model "):out.index("\n(percentage points)")]
    assert table in shown


def test_schema_prints_the_new_summary_fields(capsys):
    code, out, _ = cli(capsys, "schema", "summary")
    assert code == 0
    schema = json.loads(out)
    assert schema["x-schema-version"] == "1.3"
    text = json.dumps(schema)
    for field in ("headline", "question", "beside", "n_unscored", "rank_lower", "tied_groups", "headline_rule",
                  "unscored_convention"):
        assert f'"{field}"' in text, field
