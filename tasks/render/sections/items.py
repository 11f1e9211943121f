"""The report's item-analysis section: inert items and what they cost, suspected broken keys, the
benchmark's reliability and resolution by score band, its saturation and the reduced item set."""

from __future__ import annotations

import polars as pl

from benchcert.tasks.render.report import Section, table_html


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.2f}%"


def _pp(x) -> str:
    return "-" if x is None else f"{100 * x:.2f} pp"


def section(overview: dict, items: pl.DataFrame, bands: pl.DataFrame, neighbours: pl.DataFrame,
            reduced: pl.DataFrame | None, shown: int = 30) -> Section:
    """The item-analysis section from the analysis' tables.

    Parameters
    ----------
    overview : dict
        The one row of table ``items_overview``.
    items, bands, neighbours : polars.DataFrame
        Tables ``items``, ``items_resolution`` and ``items_neighbours``.
    reduced : polars.DataFrame or None
        Table ``items_reduced`` (one row), None without a reduced set.
    shown : int
        Flagged items listed at most.
    """
    o = overview
    level = f"{100 * (1 - o['alpha']):g}%"
    parts = [
        f"<p>{o['n_items']:,} items answered by {o['n_models']} models. <b>Inert</b> (every model scored the same): "
        f"{o['n_inert']:,} items ({o['n_inert_all_correct']:,} all right, {o['n_inert_all_wrong']:,} all wrong), "
        f"{_pct(o['inert_call_share'])} of the calls; they cannot change any ranking of these models, and a run "
        "without them saves those calls (for a new model they are still items it could miss).</p>",
        f"<p><b>Suspected broken keys</b>: {o['n_broken_key']:,} of {o['n_tested_broken_key']:,} tested 0/1 items, at a "
        f"false discovery rate of {100 * o['fdr']:g}% (Benjamini-Hochberg over the items). Each item is tested by an "
        "exact permutation test across models (its right answers sitting on the weaker models, by the rank of each "
        f"model's score on the other items); {o['n_negative_discrimination']:,} items have a negative item-rest "
        f"correlation, most of them by chance. With {o['n_models']} models, {o['n_could_be_flagged']:,} item(s) could "
        "be flagged at all (the smallest p-value an item's test can reach is 1 / C(models, right answers), and a "
        "single discovery needs one at most the level divided by the items tested); "
        f"{o['n_candidates']:,} item(s) have an unadjusted p-value at most {o['candidate_p']:g}: candidates to "
        "look at, not flags (no multiplicity control).</p>"]
    if o.get("strong_agree_non_key_candidates") is not None:
        flagged_part = ("" if o.get("strong_agree_non_key_flagged") is None else
                        f" on the flagged items {_pct(o['strong_agree_non_key_flagged'])},")
        parts.append(f"<p>Where the logs carry the chosen options, the strong models (top third) agree on one non-key "
                     f"answer{flagged_part} on the candidates {_pct(o['strong_agree_non_key_candidates'])}, and on the "
                     f"other non-inert items {_pct(o['strong_agree_non_key_not_candidates'])} of the time.</p>")
    flagged = items.filter(pl.col("broken_key")).sort("q_broken_key")
    if flagged.height:
        cols = ["item_id", "subject", "n_models", "difficulty", "discrimination", "irt_slope", "p_broken_key",
                "q_broken_key"] + (["strong_agree_non_key"] if flagged["strong_agree_non_key"].null_count()
                                   < flagged.height else [])
        parts.append(table_html(flagged.select(cols), max_rows=shown, caption="Suspected broken keys"))
    rel = ("-" if o["reliability"] is None else
           f"{o['reliability']:.4f} ({level} Feldt interval {o['reliability_lower']:.4f} to "
           f"{o['reliability_upper']:.4f}, {o['reliability_items']:,} items every model answered)")
    parts.append(
        f"<p><b>Reliability</b> (Cronbach's alpha; KR-20 on 0/1 items, the models as respondents): {rel}. "
        f"A high reliability says the benchmark orders these models consistently; it does not say how small a "
        f"difference between two models it resolves. One standard error of measurement ({_pp(o['sem'])}) is not "
        "that figure: the resolution below is the paired test's.</p>")
    if bands.height:
        parts.append(
            f"<p><b>Resolution</b>: the smallest true gap between two neighbouring models of a given score that the "
            f"comparisons' paired test (two-sided, level {o['alpha']:g}) detects with {100 * o['power']:g}% power on "
            f"these items, from each neighbour pair's own paired standard error. Median over neighbours "
            f"{_pp(o['resolution_median'])}; {o['n_neighbours_resolved']} of {neighbours.height} neighbour pairs are "
            "called different.</p>")
        parts.append(table_html(bands.select(
            (pl.col("band_low") * 100).alias("score from %"), (pl.col("band_high") * 100).alias("to %"),
            pl.col("n_pairs").alias("neighbour pairs"), (pl.col("resolution_median") * 100).alias("median pp"),
            (pl.col("resolution_min") * 100).alias("min pp"), (pl.col("resolution_max") * 100).alias("max pp")),
            float_digits=2, caption="Resolution by score band"))
    parts.append(
        f"<p><b>Saturation</b>: the best score is {_pct(o['top_score'])} ({_pp(o['headroom'])} below the ceiling); "
        f"{o['separating_items_top']:,} items still separate the top {o['n_top']} models and "
        f"{o['all_missed_items_top']:,} items all of them miss.</p>")
    if o.get("n_near_duplicate_pairs") is None:
        parts.append("<p><b>Near-duplicates</b>: not looked for; the store holds no item text "
                     "(<code>benchcert items --texts FILE</code> takes one per item).</p>")
    else:
        parts.append(f"<p><b>Near-duplicates</b> (Jaccard similarity of word 3-shingles at least "
                     f"{o['near_duplicate_jaccard']:g}, MinHash): {o['n_near_duplicate_pairs']:,} pair(s) among "
                     f"{o['n_near_duplicate_items']:,} item(s).</p>")
    if reduced is not None and reduced.height:
        r = reduced.row(0, named=True)
        parts.append(
            f"<p><b>Reduced item set</b>: {r['n_evaluated']:,} of {r['n_items']:,} items (the {r['n_inert']:,} inert "
            f"ones dropped, then a subject-stratified random subset of the {r['n_pool']:,} others), saving "
            f"{_pct(r['calls_saved_share'])} of the calls. Guarantee (the subsample planner's stratified bound, "
            f"simultaneous over the models and all their pairs at level {r['alpha']:g}): every score within "
            f"{_pp(r['score_bound'])} and every pairwise gap within {_pp(r['gap_bound'])} of the full benchmark's "
            f"(tolerance {_pp(r['tolerance'])}). On the audited models: largest score error "
            f"{_pp(r['max_score_error'])}, largest gap error {_pp(r['max_gap_error'])}, {r['sign_changes']} pair(s) "
            "whose gap changed sign. Inert items enter a score at the value every audited model had.</p>")
    return Section("Item analysis", "".join(parts), anchor="items")

