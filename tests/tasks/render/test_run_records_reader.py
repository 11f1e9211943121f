"""The dashboard's reader of summary.json models (tasks/render/run_records.py): the fast reader of well-formed
entries and the checked reader agree on every entry, well-formed or not (the fast one is a build's speed-up,
issue #37; the checked one names the bad field)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from benchcert.tasks.render.run_records import _parse_model, _parse_model_checked, _Skip

# Values a field may hold in a damaged or hand-written summary.json, beside the well-formed ones.
ODD = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.sampled_from([math.nan, math.inf, -math.inf]),
                st.text(max_size=3), st.lists(st.integers(0, 3), max_size=2))
UNIT = st.floats(0, 1)


def _score():
    interval = st.fixed_dictionaries({"method": st.sampled_from(["wilson", "headline", "hierarchical"]),
                                      "lower": UNIT, "upper": UNIT})
    head = st.fixed_dictionaries({"lower": UNIT, "upper": UNIT, "question": st.sampled_from(["items", "new_subjects"])})
    return st.fixed_dictionaries({"estimate": UNIT, "intervals": st.lists(interval, max_size=3)},
                                 optional={"headline": head})


#: A well-formed model entry, as an audit writes it.
GOOD = st.fixed_dictionaries({
    "model": st.sampled_from(["org/m", "org/m@step-2"]), "n_items": st.integers(0, 9), "coverage": UNIT,
    "pooled": _score(), "macro": _score()},
    optional={"rank": st.integers(1, 3), "rank_lower": st.integers(1, 3), "rank_upper": st.integers(1, 3),
              "tied_groups": st.lists(st.integers(1, 3), max_size=3)})


@st.composite
def models(draw):
    """A well-formed entry, or one with one field (at any depth) replaced by an odd value or removed."""
    m = draw(GOOD)
    if draw(st.booleans()):
        return m
    odd = draw(st.one_of(ODD, st.just(KeyError)))
    holder, key = m, draw(st.sampled_from(sorted(m)))
    while isinstance(holder[key], (dict, list)) and holder[key] and draw(st.booleans()):
        holder = holder[key]
        key = draw(st.sampled_from(sorted(holder) if isinstance(holder, dict) else range(len(holder))))
    if odd is KeyError and isinstance(holder, dict):
        del holder[key]
    else:
        holder[key] = None if odd is KeyError else odd
    return m


MODEL = st.one_of(models(), ODD)


def _read(reader, m):
    try:
        return reader(m, "summary.json")
    except _Skip as exc:
        return ("skipped", str(exc))


@settings(max_examples=400, deadline=None, derandomize=True)
@given(MODEL)
def test_the_fast_reader_reads_every_entry_as_the_checked_reader_does(m):
    fast, checked = _read(_parse_model, m), _read(_parse_model_checked, m)
    assert repr(fast) == repr(checked)


def _entry(**changes) -> dict:
    score = {"estimate": 0.5, "intervals": [{"method": "wilson", "lower": 0.4, "upper": 0.6}]}
    m = {"model": "org/m", "n_items": 9, "coverage": 1.0, "pooled": dict(score), "macro": dict(score),
         "tied_groups": [1]}
    m.update(changes)
    return m


def test_a_damaged_entry_is_skipped_with_its_place_or_read_leniently_never_a_crash():
    # Numbers where lists belong raised TypeError before (a crash of the whole build, not a skipped run).
    bad = _entry(pooled={"estimate": 0.5, "intervals": 5})
    for reader in (_parse_model, _parse_model_checked):
        try:
            reader(bad, "summary.json")
        except _Skip as exc:
            assert "model 'org/m' pooled" in str(exc) and "'intervals'" in str(exc)
        else:
            raise AssertionError("an entry whose intervals are a number was read")
        assert reader(_entry(tied_groups=3), "summary.json").tied_groups == ()
        assert reader(_entry(), "summary.json").tied_groups == (1,)
