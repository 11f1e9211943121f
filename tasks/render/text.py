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
    if result.parse_failures:
        lines += ["", parse_failures_table(result)]
    return "\n".join(lines)


def parse_failures_table(result: AuditResult) -> str:
    """Per model (most unparsed first): responses, unparsed and their share, the score with the unparsed
    counted wrong and the score over parsed answers only, each with its interval (summary.json's
    ``parse_failures``)."""
    level = f"{100 * (1 - result.alpha):g}%"
    head = (f"{'answers that failed to parse':<36} {'responses':>9} {'unparsed':>8} {'share':>6}  "
            f"{'unparsed wrong':>14} {level + ' interval':<14}  {'parsed only':>11} {level + ' interval':<14}")
    lines = [head, "-" * len(head)]

    def score(est, lo, hi, width) -> str:
        if est is None:
            return f"{'-':>{width}} {'-':<14}"
        return f"{100 * est:{width - 1}.2f}% {f'[{100 * lo:5.1f}, {100 * hi:5.1f}]':<14}"

    for r in sorted(result.parse_failures, key=lambda r: -r.share_unparsed):
        name = r.model if len(r.model) <= 36 else r.model[:33] + "..."
        flag = " !" if r.warn else ""
        lines.append(f"{name:<36} {r.n_responses:>9,} {r.n_unparsed:>8,} {100 * r.share_unparsed:5.1f}%  "
                     f"{score(r.score_unparsed_wrong, r.unparsed_wrong_lower, r.unparsed_wrong_upper, 14)}  "
                     f"{score(r.score_parsed_only, r.parsed_only_lower, r.parsed_only_upper, 11)}{flag}")
    lines.append("(percentage points) unparsed: responses whose answer could not be read from the output (the log's "
                 "parse flag); unparsed wrong: the score counting them 0, as the releases do; parsed only: the mean "
                 "over the items whose answer was read (not what the model would score if all parsed); ! more than "
                 "5% unparsed")
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
    mde_alpha = next((r.get("mde_alpha") for r in rows if r.get("mde_alpha") is not None), None)
    if mde_alpha is not None and mde_alpha != alpha:
        # the number beside a verdict is what that verdict can detect: at the level it is decided at
        lines.append(f"MDE: the gap each verdict detects with {100 * result.power:g}% power at the level it is "
                     f"decided at, {mde_alpha:.3g} (two-sided, Bonferroni)")
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


def _pc(x, unit: str = "%") -> str:
    return "-" if x is None else f"{100 * x:.2f}{unit}"


def items_text(result, shown: int = 20) -> str:
    """The terminal text of ``benchcert items`` (a :class:`~benchcert.tasks.items.service.ItemsResult`)."""
    o = result.overview
    lines = [
        f"{o['n_items']:,} items, {o['n_models']} models",
        f"inert (every model scored alike): {o['n_inert']:,} items ({o['n_inert_all_correct']:,} all right, "
        f"{o['n_inert_all_wrong']:,} all wrong), {_pc(o['inert_call_share'])} of the calls",
        f"suspected broken keys: {o['n_broken_key']:,} of {o['n_tested_broken_key']:,} tested items at FDR "
        f"{o['fdr']:g} (permutation test across models, Benjamini-Hochberg)",
    ]
    lines.append(f"  {o['n_could_be_flagged']:,} item(s) could be flagged at all with {o['n_models']} models (smallest "
                 f"attainable p <= FDR / items tested); {o['n_candidates']:,} item(s) have an unadjusted p <= "
                 f"{o['candidate_p']:g} (candidates, not flags)")
    if o.get("strong_agree_non_key_flagged") is not None:
        lines.append(f"  strong models agreeing on one non-key answer: {_pc(o['strong_agree_non_key_flagged'])} on the "
                     f"flagged items, {_pc(o['strong_agree_non_key_other'])} on the other non-inert ones")
    if o.get("strong_agree_non_key_candidates") is not None:
        lines.append(f"  strong models agreeing on one non-key answer: {_pc(o['strong_agree_non_key_candidates'])} on the "
                     f"candidates, {_pc(o['strong_agree_non_key_not_candidates'])} on the other non-inert items")
    flagged = result.items.filter("broken_key").sort("q_broken_key").head(shown)
    for r in flagged.iter_rows(named=True):
        agree = "" if r["strong_agree_non_key"] is None else f" strong-non-key {100 * r['strong_agree_non_key']:.0f}%"
        disc = "-" if r["discrimination"] is None else f"{r['discrimination']:+.2f}"
        lines.append(f"  {r['item_id']} ({r['subject']}): share correct {r['difficulty']:.2f}, item-rest r {disc}, "
                     f"q {r['q_broken_key']:.2g}{agree}")
    if o["reliability"] is not None:
        lines.append(f"reliability (KR-20 / Cronbach's alpha): {o['reliability']:.4f} "
                     f"[{o['reliability_lower']:.4f}, {o['reliability_upper']:.4f}] (SEM {_pc(o['sem'], ' pp')}, not "
                     "the resolution)")
    lines.append(f"resolution (smallest gap the paired test detects with {100 * o['power']:g}% power, neighbours in "
                 f"the ranking): median {_pc(o['resolution_median'], ' pp')}; "
                 f"{o['n_neighbours_resolved']} neighbour pair(s) called different")
    for r in result.bands.iter_rows(named=True):
        lines.append(f"  score {100 * r['band_low']:.0f}-{100 * r['band_high']:.0f}%: {r['n_pairs']} pair(s), median "
                     f"{100 * r['resolution_median']:.2f} pp (min {100 * r['resolution_min']:.2f}, max "
                     f"{100 * r['resolution_max']:.2f})")
    lines.append(f"saturation: best score {_pc(o['top_score'])}; {o['separating_items_top']:,} items separate the top "
                 f"{o['n_top']} models, {o['all_missed_items_top']:,} all of them miss")
    red = result.reduced
    if red is not None:
        lines.append(f"reduced set: {red.n_evaluated:,} of {red.n_items:,} items, {_pc(red.calls_saved_share)} of the "
                     f"calls saved; every score within {_pc(red.score_bound, ' pp')} and every gap within "
                     f"{_pc(red.gap_bound, ' pp')} (simultaneous, alpha {red.alpha:g}); realised: score "
                     f"{_pc(red.max_score_error, ' pp')}, gap {_pc(red.max_gap_error, ' pp')}, "
                     f"{red.sign_changes} sign change(s)")
    if o.get("n_near_duplicate_pairs") is not None:
        lines.append(f"near-duplicates (Jaccard of word 3-shingles >= {o['near_duplicate_jaccard']:g}): "
                     f"{o['n_near_duplicate_pairs']:,} pair(s) among {o['n_near_duplicate_items']:,} item(s)")
        for r in result.duplicates.sort("jaccard", descending=True).head(shown).iter_rows(named=True):
            lines.append(f"  {r['item_a']} ~ {r['item_b']}: {r['jaccard']:.2f}")
    if result.samples is not None and result.samples.height:
        lines.append("repeated samples (variance components; within = across samples of one item):")
        lines += _samples_lines(result.samples.to_dicts())
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def _f(x, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def _samples_lines(rows: list[dict]) -> list[str]:
    out = []
    for r in rows:
        line = (f"  {r['model']}: {r['n_items']:,} items, {r['mean_samples']:.1f} samples/item; within "
                f"{_f(r['within'])} [{_f(r['within_lower'])}, {_f(r['within_upper'])}], between items "
                f"{_f(r['between_items'])} [{_f(r['between_items_lower'])}, {_f(r['between_items_upper'])}], between "
                f"subjects {_f(r['between_subjects'])}; run-to-run share of an item mean's variance "
                f"{_pc(r['within_share'])}; {r['unstable_items']:,} unstable items")
        if r["pass_at_k"] is not None:
            line += (f"; pass@{r['k']} {_pc(r['pass_at_k'])} [{_pc(r['pass_lower'])}, {_pc(r['pass_upper'])}], "
                     f"mean [{_pc(r['mean_at_k_lower'])}, {_pc(r['mean_at_k_upper'])}]")
        out.append(line)
    return out


def samples_plan_text(doc: dict) -> str:
    """The terminal text of ``benchcert plan samples`` (the service's document)."""
    lines = [f"benchmark {doc['benchmark']!r} (variant {doc['variant']!r}): {doc['n_items']:,} items; budget "
             f"{doc['budget']:g}, an item with K samples costs {doc['cost_item']:g} + K x {doc['cost_sample']:g}"]
    lines += _samples_lines(doc["components"])
    for p in doc["plans"]:
        lines.append(f"  {p['model']}: K = {p['k']} samples on n = {p['n']:,} items (cost {p['cost']:g}): "
                     f"{100 * (1 - doc['alpha']):g}% half-width {_pc(p['half_width'], ' pp')}")
    lines.append("estimand: " + ("these items' mean" if doc["these_items"] else "the mean over a population of items")
                 + "; a plan from the measured components, not a guarantee")
    return "\n".join(lines)


def _null_text(d) -> str:
    """The null variants, listed apart from the tested ones (a variant tested in turn is null for the others)."""
    only_null = [v for v in d.null if v not in d.test]
    if not set(d.null) & set(d.test):
        return ", ".join(map(repr, d.null))
    return ("for each tested variant, the base and the other variants"
            + (f" (never tested: {', '.join(map(repr, only_null))})" if only_null else ""))


def perturbation_text(audit, plans: dict, *, benchmark: str, method_name: str, top_items: int = 0) -> str:
    """``benchcert perturb``'s table: per (model, tested variant) the items tested and the composite and
    classical shares (or why there is none), the no-power lines each with the plan that would give power
    (``plans`` by (model, variant)), the test's assumptions, and the ``top_items`` smallest p-values."""
    d = audit.design
    out = [f"benchmark {benchmark!r}: base {d.base!r} (alpha {audit.alpha:g}, {method_name})",
           f"  null variants:   {_null_text(d)}", f"  tested variants: {', '.join(map(repr, d.test))}"]
    head = (f"{'model':<24} {'variant':<20} {'items':>5} {'composite':>9} {'comp. BH':>8} {'classical':>9} "
            f"{'class. BH':>9}")
    out += [head, "-" * len(head)]
    no_power, low_power = [], []
    for r in audit.rows:
        model = r.model if len(r.model) <= 24 else r.model[:21] + "..."
        comp, comp_bh = r.shown_share("composite"), r.shown_share("composite", bh=True)
        clas, clas_bh = r.shown_share("classical"), r.shown_share("classical", bh=True)
        if r.no_power:
            no_power += [f"no power: {r.model} {r.variant!r}: {r.n_no_power} of {r.n_items} items - {r.no_power}",
                         f"  {plans[(r.model, r.variant)].sentence()}"]  # a plan stands under its line
        if r.low_power:
            low_power.append(f"{r.model} {r.variant!r}: {r.n_low_power} of {r.n_tested} tested items - {r.low_power}")
        if r.classical_no_power:
            no_power.append(f"no power: {r.model} {r.variant!r} (classical): {r.n_classical_no_power} of "
                            f"{r.n_items} items - {r.classical_no_power}")
        out.append(f"{model:<24} {repr(r.variant)[:20]:<20} {r.n_tested:>5} {comp:>9} {comp_bh:>8} {clas:>9} "
                   f"{clas_bh:>9}")
    out.append("items = items tested; composite = share of them where the change matters beyond the null rewordings; "
               "classical = Fisher's exact test against the base alone (energy-distance permutation test for "
               "fractional scores), over the items it can reject at all; BH = Benjamini-Hochberg across items; "
               "no alt. = every item's null range covers every rate (no alternative left to detect)")
    out += no_power + low_power + ["the composite test assumes:"] + [f"  - {a}" for a in audit.assumptions]
    if top_items:
        out += ["", _top_items(audit.items, top_items)]
    out += [f"note: {n}" for n in audit.notes]
    return "\n".join(out)


def _top_items(items, n: int) -> str:
    """The ``n`` item tests with the smallest p-values."""
    top = items.filter(items["p_value"].is_not_null()).sort("p_value").head(n)
    out = [f"{'model':<20} {'item':<12} {'variant':<16} {'rate':>6} {'null range':>15} {'p':>8} {'m':>3} {'r':>7}  "
           "status"]
    for r in top.iter_rows(named=True):
        lo, hi = (r["range_low"], r["range_high"]) if r["range_low"] is not None else (r["a_hat"], r["b_hat"])
        rng = "-" if lo is None else f"[{lo:.3f}, {hi:.3f}]"
        rr = "-" if r["r_min"] is None else f"{r['r_min']}-{r['r_max']}"
        out.append(f"{r['model'][:20]:<20} {str(r['item_id'])[:12]:<12} {repr(r['variant'])[:16]:<16} "
                   f"{r['test_rate']:6.3f} {rng:>15} {r['p_value']:8.2g} {r['m']:>3} {rr:>7}  {r['status']}")
    return "\n".join(out)


def certify_text(cert, *, benchmark: str) -> str:
    """``benchcert certify``'s table: per model and environment the score with its simultaneous bounds
    (and the new-subjects score and band where computed), then each model's failure-rate bounds."""
    from benchcert.stats.failure_rates import BLACK_BOX_SENTENCE

    rows, failure, plan = cert.rows, cert.failure, cert.plan
    level = f"{100 * (1 - cert.delta):g}%"
    out = [f"{benchmark!r}: {len({r['model'] for r in rows})} model(s), bounds hold for every environment at once "
           f"with probability >= {level} ({cert.protocol}" + (f", plan {plan.plan_id}" if plan else "")
           + ")"]
    # The new-subjects estimate and band (subject-weighted) beside the same-subjects ones, where computed.
    new = any(r.get("score_new_subjects") is not None for r in rows)
    head = (f"{'model':<32} {'environment':<28} {'score':>7} {'lower':>7} {'upper':>7}"
            + (f" {'new-subj':>8} {'lower':>7} {'upper':>7}" if new else "") + "  method")
    out += [head, "-" * len(head)]
    for r in rows:
        name = r["model"] if len(r["model"]) <= 32 else r["model"][:29] + "..."
        extra = ""
        if new:
            extra = (f" {100 * r['score_new_subjects']:7.2f}% {100 * r['lower_new_subjects']:6.2f}% "
                     f"{100 * r['upper_new_subjects']:6.2f}%" if r.get("score_new_subjects") is not None
                     else f" {'':>8} {'':>7} {'':>7}")
        out.append(f"{name:<32} {r['environment'][:28]:<28} {100 * r['score']:6.2f}% {100 * r['lower']:6.2f}% "
                   f"{100 * r['upper']:6.2f}%{extra}  {r['method']}")
    out.append("")
    for model, f in failure.items():
        question = {"same_subjects": "new items from the same subjects",
                    "finite_population": "the plan's mix of the benchmark's items"}.get(f["question"], f["question"])
        kind = "exact binomial, valid for unequal rates" if f["method"].endswith("unequal_rates") else "exact binomial"
        out.append(f"{model}: failure rate <= {100 * f['upper']:.2f}% for {question} ({level} one-sided {kind}, "
                   f"{f['failures']} failure(s) in {f['n']} items; {f['sampling']})")
        if f.get("upper_new_subjects") is not None:
            out.append(f"{model}: failure rate <= {100 * f['upper_new_subjects']:.2f}% for a new subject ({level} "
                       f"one-sided relative-entropy Hoeffding on {f['effective_subjects']:.0f} subjects, each "
                       f"weighing the same; subject-weighted failure rate {100 * f['estimate_new_subjects']:.2f}%)")
    out.append(BLACK_BOX_SENTENCE)
    if cert.subjects_note is not None:
        out.append(f"note: {cert.subjects_note}")
    out += [f"note: {n}" for n in cert.notes]
    return "\n".join(out)
