"""run_analysis names a stats-layer warning's Ref fields (tasks/audit/analyses.py ``_named``), the
same names the index wording would have given (issue #23)."""

from __future__ import annotations

import warnings

import numpy as np

from benchcert.stats.degenerate import DegenerateDataWarning, Ref
from benchcert.tasks.audit import intervals
from benchcert.tasks.audit.analyses import _named, run_analysis
from benchcert.tasks.audit.contract import AuditConfig

from conftest import matrices_from_scores


def test_refs_are_named_from_their_fields_as_the_text_would_be():
    m = matrices_from_scores({"a": np.r_[0.0, 1.0], "b": np.r_[1.0, 1.0], "c": np.r_[0.0, 0.0]}, np.zeros(2, int))
    msg = DegenerateDataWarning("x {} y {} z {}", Ref("model", [2, 0]), Ref("model pair", [(1, 0)]),
                                Ref("model", [0, 9]))
    # the last names no model of this benchmark, so it stays as the index wording
    assert _named(msg, m) == "x model(s) 'c', 'a' y model pair(s) 'b vs a' z model column(s) [0, 9]"
    assert _named(str(msg), m) == str(msg)  # text is passed on as it is, never parsed
    many = DegenerateDataWarning("{}", Ref("model pair", [(0, 1)] * 9))
    assert _named(many, m) == "model pair(s) " + ", ".join(["'a vs b'"] * 8) + ", ... (9 in all)"
    fit = DegenerateDataWarning("w ({})", Ref("fit row", [1]))
    assert _named(fit, m) == "w (fit rows [1])"


def test_the_interval_analysis_passes_the_refs_on_to_be_named():
    n = 40
    scores = {"full": (np.arange(n) % 3 == 0).astype(float), "one-item": np.r_[0.5, np.full(n - 1, np.nan)]}
    m = matrices_from_scores(scores, np.repeat(np.arange(4), 10))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        intervals.analyze(m, AuditConfig())
    passed = [w.message for w in caught if "one-item" not in str(w.message) and w.message.refs]
    assert passed and all(str(w).startswith(("pooled score: ", "macro score: ")) for w in passed)
    assert all("model column" not in _named(w, m) and "'one-item'" in _named(w, m) for w in passed)
    out = run_analysis("comparator_intervals", intervals.analyze, m, AuditConfig())
    assert any("model(s) 'one-item'" in w for w in out.warnings)
