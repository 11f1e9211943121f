"""A verdict is never shown as a word alone: every verdict row carries its question, gap and interval.

Every page that shows a checkpoint verdict (the run page, the overview, the benchmark page, the
checkpoint grid, the training-run page and the report) builds it from :func:`verdict_view`, which
reads the verdict's own fields as summary.json stores them (``detail.gap``, ``detail.lower``,
``detail.upper``, ``detail.cs_lower``/``cs_upper``, ``detail.question_key`` ...) and never
recomputes a number: the verdict and the numbers beside it stay the ones the comparison
recorded, about the one estimand it names.

An open (``inconclusive``) verdict says what would resolve it when the artifact carries that
number (:data:`RESOLVE_FIELDS`: how many more items or subjects), and otherwise its minimum
detectable gap at the current size, labelled as such.

Each rendered verdict is an element with ``data-verdict``, ``data-gap`` and ``data-interval``
attributes, so a test (and a reader of the HTML) can check that no verdict appears without its gap
and interval.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchcert.tasks.compare.recorded import deciding_gap, deciding_interval
from benchcert.tasks.finite import finite_or_none as _num
from benchcert.tasks.render.escape import escape
from benchcert.tasks.render.site_html import DASH, Html, table

__all__ = ["VerdictView", "verdict_view", "verdict_badge", "verdicts_table", "RESOLVE_FIELDS", "SYMBOLS",
           "fmt_gap", "fmt_gap_interval"]

#: A symbol per direction, so a verdict never depends on colour alone.
SYMBOLS = {"improved": "\u25b2", "regressed": "\u25bc", "inconclusive": "\u25cb"}

#: Plain-number fields an open verdict may carry that say what would resolve it, with the unit each counts;
#: the first present is shown.  Issue #35's document (``detail.more_items``, a dict) is read first.
RESOLVE_FIELDS = (("more_items", "more items"), ("items_needed", "more items"), ("more_subjects", "more subjects"),
                  ("subjects_needed", "more subjects"))

_QUESTION_NAMES = {"items": "items", "new-subjects": "new subjects", "new_subjects": "new subjects",
                   "subjects": "new subjects"}


def fmt_gap(gap: float | None) -> str:
    """``0.0123`` -> ``"+1.23 pp"``; missing -> an em dash."""
    return DASH if gap is None else f"{100 * gap:+.2f} pp".replace("-", "\u2212", 1)


def fmt_gap_interval(lo: float | None, hi: float | None) -> str:
    """``(-0.005, 0.03)`` -> ``"[−0.50, +3.00] pp"``; a missing end -> an em dash."""
    if lo is None or hi is None:
        return DASH
    return f"[{100 * lo:+.2f}, {100 * hi:+.2f}] pp".replace("-", "\u2212")


@dataclass(frozen=True)
class VerdictView:
    """One verdict as every page shows it (all text; escaped where it is inserted)."""

    benchmark: str
    model: str
    baseline: str
    verdict: str
    question: str
    gap: str
    interval: str
    interval_method: str
    decided_by: str
    resolve: str
    gap_value: float | None
    lower: float | None
    upper: float | None
    interval_kind: str = ""  # which interval ``interval`` is: the one that decides (:func:`deciding_interval`)
    fixed: str = DASH  # the look's fixed-sample interval at full alpha, for information

    @property
    def direction(self) -> str:
        return self.verdict if self.verdict in SYMBOLS else "inconclusive"

    @property
    def is_open(self) -> bool:
        return self.direction == "inconclusive"

    @property
    def complete(self) -> bool:
        """Whether the gap and the interval are both known (a page shows the verdict only beside them)."""
        return self.gap_value is not None and self.lower is not None and self.upper is not None

    def tooltip(self) -> str:
        return (f"{self.model} vs {self.baseline} on {self.benchmark}: {self.verdict} \u00b7 question {self.question}"
                f" \u00b7 gap {self.gap} \u00b7 interval {self.interval}"
                + (f" ({self.interval_kind})" if self.interval_kind else "")
                + (f" \u00b7 fixed-sample {self.fixed}" if self.fixed not in (DASH, self.interval) else "")
                + (f" \u00b7 {self.resolve}" if self.is_open else ""))


def _question(detail: dict) -> str:
    key = detail.get("question_key")
    if isinstance(key, str) and key:
        return _QUESTION_NAMES.get(key, key)
    text = detail.get("question")
    if isinstance(text, str) and text:
        return _QUESTION_NAMES.get(text.split(":")[0].strip(), text.split(":")[0].strip())
    return "not recorded"


def _more_items_doc(doc: dict) -> str | None:
    """The text of a "more items needed" document (issue #35: ``unit``, ``more_for_observed_gap``,
    ``observed_gap``, ``power``; ``reason`` when there is no number)."""
    n, unit = _num(doc.get("more_for_observed_gap")), str(doc.get("unit") or "items")
    if n is None:
        return str(doc["reason"]) if doc.get("reason") else None
    gap, power = _num(doc.get("observed_gap")), _num(doc.get("power"))
    lower = "at least" if doc.get("lower_bound", unit == "subjects") else "about"
    return (f"{lower} {n:,.0f} more {unit} (same design)"
            + (f" would resolve a {100 * gap:.2f}-point gap" if gap is not None else "")
            + (f" with {100 * power:g}% power" if power is not None else ""))


def _mde_name(detail: dict) -> str:
    """The MDE named with its level: ``mde_alpha`` where the row carries it (a family's Bonferroni level), else
    the verdict's ``alpha``; a verdict recorded at a look (a checkpoint's, a recorded suite's) is decided by the
    sequential tests, its MDE is the fixed-sample test's at that level."""
    at = _num(detail.get("mde_alpha"))
    if at is not None:
        return f"MDE at level {at:.3g}"
    at = _num(detail.get("alpha"))
    if at is None:
        return "MDE"
    return ("fixed-sample " if detail.get("look") is not None else "") + f"MDE at level {at:.3g}"


def _resolve(verdict: str, detail: dict) -> str:
    if verdict != "inconclusive" and verdict in SYMBOLS:
        return "decided"
    if isinstance(detail.get("more_items"), dict):
        text = _more_items_doc(detail["more_items"])
        if text:
            return text
    for key, unit in RESOLVE_FIELDS:
        n = _num(detail.get(key))
        if n is not None:
            at = _num(detail.get("resolve_gap"))
            return (f"about {n:,.0f} {unit}" + (f" would resolve a {100 * abs(at):.2g}-point gap" if at else "")
                    + " (80% power)")
    mde = _num(detail.get("mde"))
    if mde is not None:
        return f"not in this artifact; detectable now: {100 * mde:.2f} pp ({_mde_name(detail)})"
    return "not in this artifact"


def _decided(decided, look) -> str:
    """``"first look (look 1)"``, ``"anytime test (look 3)"``; an open verdict: ``"open at look 2"``."""
    at = f"look {look}" if isinstance(look, int) and not isinstance(look, bool) else "this look"
    if not decided:
        return f"open at {at}"
    name = {"first_look": "first-look test", "anytime": "anytime test"}.get(str(decided), str(decided).replace("_", " "))
    return f"{name} ({at})"


def verdict_view(v: dict, benchmark: str = "") -> VerdictView:
    """The shown fields of one summary.json verdict (``{"kind", "model", "baseline", "verdict", "detail"}``)."""
    detail = v.get("detail") if isinstance(v.get("detail"), dict) else {}
    word = str(v.get("verdict") or "")
    gap, fixed_lo, fixed_hi = deciding_gap(detail), _num(detail.get("lower")), _num(detail.get("upper"))
    lo, hi, _, kind = deciding_interval(detail, word)
    decided = detail.get("decided_by")
    look = detail.get("look")
    return VerdictView(
        benchmark=benchmark, model=str(v.get("model") or ""), baseline=str(v.get("baseline") or DASH), verdict=word,
        question=_question(detail), gap=fmt_gap(gap), interval=fmt_gap_interval(lo, hi),
        interval_method=str(detail.get("method") or ""),
        decided_by=_decided(decided, look),
        resolve=_resolve(word, detail), gap_value=gap, lower=lo, upper=hi, interval_kind=kind,
        fixed=fmt_gap_interval(fixed_lo, fixed_hi))


def _data_attrs(view: VerdictView) -> str:
    return (f' data-verdict="{escape(view.direction)}" data-gap="{escape(view.gap)}" '
            f'data-interval="{escape(view.interval)}"')


def verdict_badge(view: VerdictView) -> Html:
    """The verdict word with its symbol and class (colour), carrying its gap and interval as data."""
    cls = {"improved": "good", "regressed": "bad", "inconclusive": "open"}[view.direction]
    return Html(f'<span class="verdict {cls}"{_data_attrs(view)} title="{escape(view.tooltip())}">'
                f"{SYMBOLS[view.direction]} {escape(view.verdict or DASH)}</span>")


def verdicts_table(views: list[VerdictView], *, cls: str = "verdicts", with_benchmark: bool = False,
                   links: dict[str, str] | None = None) -> str:
    """The verdict rows: (benchmark,) model, baseline, question, gap, the interval that decides and its name, the
    fixed-sample interval, verdict, decided by, and what would resolve an open one.  ``links`` maps a benchmark to its page."""
    head = (["benchmark"] if with_benchmark else []) + ["model", "baseline", "question", "gap",
                                                          "interval that decides", "which interval",
                                                          "fixed-sample interval (full alpha)", "verdict",
                                                          "decided by", "what would resolve it"]
    rows = []
    for view in views:
        bench: list = []
        if with_benchmark:
            target = (links or {}).get(view.benchmark)
            bench = [Html(f'<a href="{escape(target)}">{escape(view.benchmark)}</a>') if target else view.benchmark]
        rows.append([*bench, view.model, view.baseline, view.question, view.gap,
                     Html(f'<span title="{escape(view.interval_kind)}">{escape(view.interval)}</span>'),
                     view.interval_kind, Html(f'<span title="{escape(view.interval_method)}">{escape(view.fixed)}</span>'),
                     verdict_badge(view), view.decided_by, view.resolve])
    names = (["benchmark"] if with_benchmark else []) + ["model", "baseline", "question", "gap", "iv", "iv-kind",
                                                        "fixed", "verdict", "decided", "resolve"]
    return table(head, rows, cls=cls, cell_cls=names, num=set(), caption=CAPTION if rows else "")


#: What the intervals of a verdict row are (tasks/compare/verdicts.py, :func:`deciding_interval`).
CAPTION = ("Gap = candidate \u2212 baseline. \"Interval that decides\" is the interval of the test that decides the "
           "verdict: the anytime interval (valid at every look) for an open verdict or one the anytime test decided, "
           "the first-look interval for one the first-look test decided (at its share of alpha); \"which interval\" "
           "names it. The look's fixed-sample interval at full alpha is for information: it can exclude 0 beside an "
           "open verdict.")
