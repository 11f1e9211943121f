"""Warnings carry the indices they list as Ref fields (issue #23): the text is exactly the
index wording (tests/tasks/audit/test_analysis_warnings_refs.py: the names put in)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

from benchcert.stats.degenerate import DegenerateDataWarning, IndexedWarning, Ref, warn_degenerate, warn_indexed


def _caught(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return caught


def test_a_ref_reads_as_the_index_list():
    assert str(Ref("model", np.array([3, 7]))) == "model column(s) [3, 7]"
    assert str(Ref("subject", range(10))) == "subject(s) [0, 1, 2, 3, 4, 5, 6, 7, ... (10 in all)]"
    assert str(Ref("model pair", [(np.int64(3), 7)])) == "model column pair(s) [(3, 7)]"
    assert str(Ref("domain model", np.argwhere(np.eye(2, dtype=bool)))) == "(domain, model) [(0, 0), (1, 1)]"
    assert str(Ref("entry", [4])) == "entry [4]" and str(Ref("entry", [4, 5])) == "entries [4, 5]"
    with pytest.raises(ValueError, match="kind"):
        Ref("column", [1])


def test_the_warning_keeps_its_template_and_refs_and_points_at_the_caller():
    def public():
        warn_degenerate("f: {} answered nothing; {} too", Ref("model", [1]), Ref("domain", [0, 2]), stacklevel=3)

    [w] = _caught(public)
    assert w.category is DegenerateDataWarning and w.filename == __file__
    assert str(w.message) == "f: model column(s) [1] answered nothing; domain(s) [0, 2] too"
    assert w.message.template == "f: {} answered nothing; {} too"
    assert w.message.refs == (Ref("model", (1,)), Ref("domain", (0, 2)))
    back = pickle.loads(pickle.dumps(w.message))
    assert str(back) == str(w.message) and back.refs == w.message.refs


def test_a_plain_message_is_kept_as_it_is_braces_and_all():
    [w] = _caught(lambda: warnings.warn("odd {x}", DegenerateDataWarning))
    assert str(w.message) == "odd {x}" and w.message.refs == ()
    [w] = _caught(lambda: warn_degenerate("odd {x}"))
    assert str(w.message) == "odd {x}"


def test_another_category_gets_the_same_fields():
    class Other(IndexedWarning, UserWarning):
        pass

    [w] = _caught(lambda: warn_indexed(Other, "g: {}", Ref("subject", [2])))
    assert w.category is Other and str(w.message) == "g: subject(s) [2]" and w.message.refs


def test_a_warning_retold_with_context_keeps_its_refs():
    w = DegenerateDataWarning("f: {}", Ref("model", [1]))
    told = w.retold("pooled {score}: ")
    assert type(told) is DegenerateDataWarning and told.refs == w.refs
    assert str(told) == "pooled {score}: f: model column(s) [1]"
    assert str(told.retold(refs=(Ref("model", [2]),))) == "pooled {score}: f: model column(s) [2]"
    plain = DegenerateDataWarning("odd {x}").retold("p: ")
    assert str(plain) == "p: odd {x}" and plain.refs == ()
