"""Warnings carry the indices they list as Ref fields (issue #23): the text is exactly the
index wording, and the tasks layer names the refs without parsing the text."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

from benchcert.stats._common import DegenerateDataWarning, IndexedWarning, Ref, warn_degenerate, warn_indexed
from benchcert.tasks.audit.analyses import _named

from conftest import matrices_from_scores


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


def test_refs_are_named_from_their_fields_as_the_text_would_be():
    m = matrices_from_scores({"a": np.r_[0.0, 1.0], "b": np.r_[1.0, 1.0], "c": np.r_[0.0, 0.0]}, np.zeros(2, int))
    msg = DegenerateDataWarning("x {} y {} z {}", Ref("model", [2, 0]), Ref("model pair", [(1, 0)]),
                                Ref("model", [0, 9]))
    # the last names no model of this benchmark, so it stays as the index wording
    assert _named(msg, m) == "x model(s) 'c', 'a' y model pair(s) 'b vs a' z model column(s) [0, 9]"
    assert _named(msg, m) == _named(str(msg), m)
    many = DegenerateDataWarning("{}", Ref("model pair", [(0, 1)] * 9))
    assert _named(many, m) == "model pair(s) " + ", ".join(["'a vs b'"] * 8) + ", ... (9 in all)"
    assert _named(many, m) == _named(str(many), m)
    fit = DegenerateDataWarning("w ({})", Ref("fit row", [1]))
    assert _named(fit, m) == "w (fit rows [1])"
