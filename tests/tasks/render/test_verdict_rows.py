"""A verdict row carries its question, gap, interval and what would resolve an open one, read from the verdict's
own fields (tasks/render/verdict_rows.py); reference values are the fields written below."""

from __future__ import annotations

from benchcert.tasks.render.verdict_rows import verdict_badge, verdict_view, verdicts_table


def _v(verdict: str, **detail) -> dict:
    return {"kind": "checkpoint", "model": "org/m@step-2", "baseline": "org/m", "verdict": verdict, "detail": detail}


def test_numbers_come_from_the_fields():
    view = verdict_view(_v("regressed", gap=-0.0615, lower=-0.07, upper=-0.053, cs_lower=-0.09, cs_upper=-0.03,
                           question_key="new-subjects", decided_by="anytime", look=3, method="clustered_subject"),
                        "mmlu")
    # the anytime test decided: its interval is the one shown, the fixed-sample one is for information
    assert (view.question, view.gap, view.interval, view.fixed) == (
        "new subjects", "\u22126.15 pp", "[\u22129.00, \u22123.00] pp", "[\u22127.00, \u22125.30] pp")
    assert view.interval_kind == "anytime interval (valid at every look)"
    assert view.decided_by == "anytime test (look 3)" and view.resolve == "decided" and view.complete
    badge = verdict_badge(view)
    assert 'data-verdict="regressed"' in badge and 'data-gap="\u22126.15 pp"' in badge and "\u25bc regressed" in badge


def test_an_open_verdict_says_what_would_resolve_it():
    doc = {"unit": "items", "more_for_observed_gap": 2400, "observed_gap": 0.01, "power": 0.8, "reason": None}
    assert verdict_view(_v("inconclusive", gap=0.01, lower=-0.01, upper=0.03, more_items=doc)).resolve == (
        "about 2,400 more items (same design) would resolve a 1.00-point gap with 80% power")
    subjects = {"unit": "subjects", "more_for_observed_gap": 12, "observed_gap": 0.02, "power": 0.8}
    assert verdict_view(_v("inconclusive", gap=0.02, more_items=subjects)).resolve.startswith("at least 12 more subjects")
    assert verdict_view(_v("inconclusive", more_subjects=7)).resolve == "about 7 more subjects (80% power)"
    # without the number the artifact says so, and gives the minimum detectable gap as what it is
    open_view = verdict_view(_v("inconclusive", gap=0.01, lower=-0.01, upper=0.03, mde=0.0312, look=1))
    assert open_view.resolve == "not in this artifact; detectable now: 3.12 pp (MDE)"
    assert open_view.decided_by == "open at look 1" and open_view.question == "not recorded"


def test_a_verdict_without_numbers_is_not_complete_and_shows_dashes():
    view = verdict_view(_v("improved"))
    assert not view.complete and view.gap == "\u2014" and view.interval == "\u2014"
    html = verdicts_table([view])
    assert 'data-gap="\u2014"' in html  # what the browser test's check refuses on any page


def test_names_are_escaped():
    html = verdicts_table([verdict_view({**_v("inconclusive", gap=0.0, lower=0.0, upper=0.0), "model": "<b>x</b>"},
                                        "<i>b</i>")], with_benchmark=True)
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html and "&lt;i&gt;b&lt;/i&gt;" in html


def test_the_interval_shown_is_the_one_that_decides():
    """After one look the fixed-sample interval at full alpha can exclude 0 while the recorded verdict is open (the
    dashboard fixture's alpha step-1000: [-14.2, -0.8] beside "inconclusive"); the row shows the anytime interval."""
    open_view = verdict_view(_v("inconclusive", gap=-0.075, lower=-0.142, upper=-0.008, cs_lower=-0.215,
                                cs_upper=0.06, look=1))
    assert (open_view.lower, open_view.upper) == (-0.215, 0.06) and open_view.fixed == "[\u221214.20, \u22120.80] pp"
    first = dict(gap=0.13, lower=0.073, upper=0.19, cs_lower=0.01, cs_upper=0.26, decided_by="first_look", look=1)
    # a first-look decision with its first-look interval recorded shows that one, named with its share of alpha
    view = verdict_view(_v("improved", **first, first_lower=0.05, first_upper=0.21, first_look_share=0.5))
    assert (view.lower, view.upper, view.interval_kind) == (0.05, 0.21, "first-look interval at alpha \u00d7 0.5")
    # without it (a look recorded before issue #37) the anytime interval when it agrees with the verdict (here
    # [1, 26] pp beside "improved"), else the fixed-sample interval; the row says which it is
    view = verdict_view(_v("improved", **first))
    assert (view.lower, view.upper) == (0.01, 0.26) and "not recorded" in view.interval_kind
    assert view.interval_kind.startswith("anytime interval")
    view = verdict_view(_v("improved", **{**first, "cs_lower": -0.02}))
    assert (view.lower, view.upper) == (0.073, 0.19) and "not recorded" in view.interval_kind
    assert view.interval_kind.startswith("fixed-sample interval")
    # a verdict that is no recorded look (no anytime interval): its fixed-sample interval
    assert verdict_view(_v("regressed", gap=-0.1, lower=-0.2, upper=-0.05)).interval_kind == "fixed-sample interval"


def test_a_later_look_shows_the_first_looks_gap_beside_its_interval():
    """A verdict the first-look test decided, recorded again at look 3: the row's interval is the first look's, so
    its gap is the first look's (``first_gap``), not look 3's fixed-sample gap, which that interval need not hold."""
    view = verdict_view(_v("improved", gap=0.01, lower=-0.02, upper=0.04, cs_lower=-0.03, cs_upper=0.05,
                           decided_by="first_look", look=3, first_gap=0.13, first_lower=0.05, first_upper=0.21,
                           first_look_share=0.5))
    assert (view.gap, view.gap_value, view.lower, view.upper) == ("+13.00 pp", 0.13, 0.05, 0.21)
    # decided by the anytime test: the look's own gap (its interval is valid at every look)
    view = verdict_view(_v("improved", gap=0.01, cs_lower=0.002, cs_upper=0.05, decided_by="anytime", look=3,
                           first_gap=0.13))
    assert (view.gap, view.lower) == ("+1.00 pp", 0.002)


def test_the_mde_is_named_with_its_level():
    """The MDE beside an open verdict names its level: the row's ``mde_alpha`` (a family's Bonferroni level), else
    the verdict's alpha; a verdict recorded at a look is decided by the sequential tests, so its MDE is named as the
    fixed-sample test's (review of issue #36)."""
    from benchcert.tasks.audit.results import verdict_entry
    from benchcert.tasks.render.site_views import suite_view

    base = dict(gap=0.01, lower=-0.01, upper=0.03, mde=0.0312)
    assert verdict_view(_v("inconclusive", **base, mde_alpha=0.0125, alpha=0.05)).resolve.endswith(
        "3.12 pp (MDE at level 0.0125)")
    assert verdict_view(_v("inconclusive", **base, alpha=0.05, look=2)).resolve.endswith(
        "3.12 pp (fixed-sample MDE at level 0.05)")
    # a recorded checkpoint verdict carries its alpha (and mde_alpha, when it has one) to the page
    entry = verdict_entry({"candidate": "org/m@step-2", "baseline": "org/m", "verdict": "inconclusive", **base,
                           "alpha": 0.05, "look": 1})
    assert entry.detail["alpha"] == 0.05 and "mde_alpha" in entry.detail
    shown = {"kind": entry.kind, "model": entry.model, "baseline": entry.baseline, "verdict": entry.verdict,
             "detail": entry.detail}
    assert verdict_view(shown).resolve.endswith("(fixed-sample MDE at level 0.05)")
    # the suite score's row: its alpha beside its MDE
    doc = {"candidate": "org/m@step-2", "baseline": "org/m", "suite": {"name": "core"}, "alpha": 0.05,
           "score": {"gap": 0.01, "lower": -0.01, "upper": 0.03, "verdict": "inconclusive", "mde": 0.0312,
                     "alpha": 0.05}}
    view = suite_view(doc)
    assert view is not None and view.resolve.endswith("3.12 pp (MDE at level 0.05)"), view
