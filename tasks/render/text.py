"""Terminal text of typed results: the tables ``benchcert`` prints, built from the same objects the
Python API returns (so the two never disagree)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchcert.tasks.audit.headline import QUESTIONS, headline_of, interval_of, wide_note
from benchcert.tasks.schemas import ModelSummary

if TYPE_CHECKING:  # (an AuditResult renders itself with this module: only its type is needed here)
    from benchcert.tasks.audit.audit_result import AuditResult


def _rank(m: ModelSummary) -> str:
    if m.rank is None:
        return "-"
    groups = ",".join(str(g) for g in m.tied_groups)
    return f"{m.rank} [{m.rank_lower}-{m.rank_upper}]" + (f" g{groups}" if groups else "")


_FOOTNOTES = {
    "new_subjects": "new subjects = hierarchical bound: how good is the model on new subjects drawn like these "
                    "(items, subjects and domains exchangeable); iid = items treated as independent",
    "items": "items independent = hierarchical bound with hierarchy 'none' (item-level only); iid = items "
             "treated as independent",
    "same_subjects": "these subjects = same-subjects interval: how good is the model on this benchmark's "
                     "subjects, items sampled within them; new subj = the new-subjects (hierarchical) bound"}


def audit_table(result: AuditResult) -> str:
    """Per model: items without a score, pooled and macro score, the macro score's headline interval
    (the question it answers in the header), its half-width and, beside it, the new-subjects half-width
    (when the headline is the same-subjects interval) or the iid one, and the rank with its simultaneous
    interval and tied groups; then the footnotes that say what each column answers."""
    level = f"{100 * (1 - result.alpha):g}%"
    models = result.models
    heads = [headline_of(m.macro) for m in models]
    question = result.headline_question
    same = question == "same_subjects"
    title = f"macro {level}, {QUESTIONS[question]}"
    second = "new subj ±" if same else "iid ±"
    width = max(len(title), 15)
    head = (f"{'model':<36} {'items':>6} {'no score':>8} {'pooled':>7} {'macro':>7}  {title:<{width}} {'±':>6} "
            f"{second:>10}  rank [{level}] tied")
    lines = [head, "-" * len(head)]
    for m, hd in zip(models, heads):
        hd_s = f"[{100 * hd.lower:5.1f}, {100 * hd.upper:5.1f}]" if hd else "-"
        hw_s = f"{100 * hd.half_width:.2f}" if hd else "-"
        other = (hd.beside if hd else None) if same else interval_of(m.macro, "iid_clt")
        other_s = f"{100 * other.half_width:.2f}" if other else "-"
        name = m.model if len(m.model) <= 36 else m.model[:33] + "..."
        lines.append(f"{name:<36} {m.n_items:>6} {'-' if m.n_unscored is None else m.n_unscored:>8} "
                     f"{100 * m.pooled.estimate:6.2f}% {100 * m.macro.estimate:6.2f}%  {hd_s:<{width}} "
                     f"{hw_s:>6} {other_s:>10}  {_rank(m)}")
    lines.append("(percentage points) " + _FOOTNOTES[question])
    if same:
        with_beside = [(m, h) for m, h in zip(models, heads) if h and h.beside]
        if with_beside:
            m, tight = min(with_beside, key=lambda mh: mh[1].beside.half_width)
            lines.append(f"headline: these subjects, because {wide_note(m.n_subjects, tight.beside.half_width)}")
    if any(m.rank is not None for m in models):
        lines.append(f"rank: by pooled score, with its simultaneous {level} interval over every model; tied: the groups "
                     "of models the comparisons cannot tell apart (table tied_groups)")
    if any(m.n_unscored for m in models):
        lines.append("no score: benchmark items this model has no score for, left out of its scores (not counted "
                     "wrong; summary.json unscored_convention)")
    return "\n".join(lines)


def comparison_table(result) -> str:
    """A :class:`~benchcert.tasks.compare.service.ComparisonResult` as ``benchcert compare`` prints it:
    the header naming the question and the estimand, then one line per candidate with the gap, the
    interval that decides its verdict, p-values, MDE, shared and excluded items and the verdict."""
    rows, many, alpha = result.comparisons, result.several, result.alpha
    level = f"{100 * (1 - alpha):g}%"
    lines = [f"{result.benchmark!r}: candidate vs baseline {result.baseline!r}; gap = candidate - baseline on shared "
             f"items, {level} interval {result.method}" + ("; with several candidates the interval shown is the "
                                                           "Bonferroni simultaneous one and decides the verdict"
                                                           if many else ""),
             f"question: {result.question} (--question {result.question_key})",
             # Every verdict, gap and interval below is about this one estimand.
             f"estimand: {result.estimand}"]
    exact = result.exact_test
    head = (f"{'candidate':<32} {'gap pp':>7}  {level + ' interval':<18} {'p':>9} "
            + (f"{'p bonf':>9} " if many else "") + f"{'p exact':>9} {'MDE pp':>7} {'shared':>7} {'excl':>5}  verdict")
    lines += [head, "-" * len(head)]
    subjects_q = result.question_key == "new-subjects"  # no item-level exact test or MDE beside its verdict
    for row in rows:
        name = row.candidate if len(row.candidate) <= 32 else row.candidate[:29] + "..."
        shown = row.deciding_interval
        iv = f"[{100 * shown.lower:6.2f}, {100 * shown.upper:6.2f}]"
        lines.append(f"{name:<32} {100 * row.gap:7.2f}  {iv:<18} {row['p_value']:9.3g} "
                     + (f"{row['p_adjusted']['bonferroni']:9.3g} " if many else "")
                     + (f"{'-':>9} {'-':>7}" if subjects_q else f"{row['p_values'][exact]:9.3g} {100 * row['mde']:7.2f}")
                     + f" {row['n_shared']:7d} {row['n_excluded']:5d}  {row.verdict}")
    from benchcert.tasks.compare.more_items import more_items_line

    lines += [line for row in rows if (line := more_items_line(repr(row.candidate), row.get("more_items")))]
    return "\n".join(lines)


def suite_table(result) -> str:
    """A :class:`~benchcert.tasks.compare.suite.SuiteResult` as ``benchcert compare --suite`` prints it: the
    suite's answers, each with its guarantee, then one line per benchmark (gap, the interval that decides its
    own verdict, its verdict, and what the suite's family-wise decisions say of it)."""
    from benchcert.tasks.compare.more_items import more_items_line

    level = f"{100 * (1 - result.alpha):g}%"
    rec = f", recorded look {result.look}" if result.recorded else ""
    lines = [f"suite {result.suite.name!r} ({len(result.lines)} benchmarks): {result.candidate!r} against "
             f"{result.baseline!r}; gap = candidate - baseline; question {result.question}{rec}",
             *suite_summary(result)]
    head = (f"{'benchmark':<32} {'weight':>6} {'gap pp':>7}  {level + ' interval':<18} {'verdict':<13} "
            f"{'suite claim':<11} {'p reg Holm':>10}")
    lines += [head, "-" * len(head)]
    for ln in result.lines:
        name = ln.benchmark if len(ln.benchmark) <= 32 else ln.benchmark[:29] + "..."
        iv = ln.row.deciding_interval
        shown = "[   n/a]" if iv.lower is None else f"[{100 * iv.lower:6.2f}, {100 * iv.upper:6.2f}]"
        gap = "n/a" if ln.row.gap is None else f"{100 * ln.row.gap:7.2f}"
        lines.append(f"{name:<32} {ln.weight:6.3f} {gap:>7}  {shown:<18} {ln.row.verdict:<13} "
                     f"{ln.suite_claim or '-':<11} {ln.p_regressed_holm:10.3g}")
    lines += [line for ln in result.lines if (line := more_items_line(repr(ln.benchmark), ln.more_items))]
    return "\n".join(lines)


def suite_summary(result) -> list[str]:
    """The suite's answers as lines of text (the head of ``compare --suite``'s output)."""
    a = result.alpha
    lines = [f"(a) regressed on some benchmark: {'YES' if result.regressed_somewhere else 'no'} "
             f"[{result.guarantees['regressed_somewhere']}]",
             f"(b) improved: {', '.join(result.improved) or 'none'}; regressed: {', '.join(result.regressed) or 'none'}"
             f" [{result.guarantees['named']}]"]
    s = result.score
    if s is None:
        lines.append("(c) suite score: not available (see warnings)")
    else:
        lines.append(f"(c) suite score gap {100 * s.estimate:+.2f} pp, {100 * (1 - a):g}% interval "
                     f"[{100 * s.lower:.2f}, {100 * s.upper:.2f}] pp: {s.verdict} [{result.guarantees['score']}]")
        if s.verdict == "inconclusive" and s.more_items is not None:
            lines.append(f"    suite score inconclusive; about {s.more_items:,} more items over the suite (same design, "
                         f"in the present proportions) would resolve a {100 * abs(s.estimate):.2f}-point gap with "
                         f"{100 * s.power:g}% power; the present items resolve {100 * s.mde:.2f} points")
    return lines
