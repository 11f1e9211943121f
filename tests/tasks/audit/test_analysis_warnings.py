"""Warnings reach users with names, never column indices or codes (issue #18, item 8)."""

import polars as pl

from benchcert.tasks.audit.analyses import ANALYSES, run_analysis
from benchcert.tasks.audit.contract import AuditConfig
from benchcert.tasks.store.matrices import BenchmarkMatrices


def _matrices() -> BenchmarkMatrices:
    rows = []
    for model in ("alpha/m", "beta/m", "gamma/m"):
        for i in range(40):
            subject = f"s{i % 4}"
            if model == "beta/m" and subject != "s0":  # beta answered one subject (domain d0) only
                continue
            rows.append({"model": model, "item_id": f"q{i}", "subject": subject, "domain": f"d{i % 2}",
                         "score": float((i * 7 + len(model) + ord(model[0])) % 3 == 0)})
    return BenchmarkMatrices("b", "", pl.DataFrame(rows))


def test_scores_warnings_name_models_subjects_and_domains():
    out = run_analysis("scores", ANALYSES["scores"], _matrices(), AuditConfig())
    text = "\n".join(out.warnings)
    assert "column(s)" not in text and "[1]" not in text
    assert "model(s) 'beta/m' answered fewer than 2 subjects" in text
    assert "domain(s) 'd1' have no observed item for model(s) 'beta/m'" in text
    subjects_line = next(w for w in out.warnings if "subject(s) " in w and "no observed item" in w)
    assert all(f"'s{k}'" in subjects_line for k in (1, 2, 3)) and "'s0'" not in subjects_line
