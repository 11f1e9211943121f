"""The item analysis of one benchmark (``benchcert items`` and the audit's ``items`` analysis): the one
home of its rules.

What it decides: which items are inert and what they cost, which are flagged as suspected broken
keys (the permutation test and its false discovery rate, stats/items.py), the 2PL fit's minimum
of models (stats/irt.py), the benchmark's resolution by score band (stats/resolution.py, the
comparisons' paired test and its minimum detectable effect), and the reduced item set with the
subsample planner's stratified guarantee (tasks/items/reduce.py). It returns one frozen
:class:`ItemsResult`; the audit's analysis and the command render it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from benchcert.stats.comparisons import MIN_SUBJECTS_CLUSTERED
from benchcert.stats.irt import MIN_MODELS, fit_2pl
from benchcert.stats.items import broken_key_test, item_statistics, reliability
from benchcert.stats.resolution import band_resolution, neighbour_resolution, saturation
from benchcert.tasks.errors import NotAnalysableError
from benchcert.tasks.finite import finite_or_none as _finite
from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT
from benchcert.tasks.items.defaults import DEFAULT_FDR, DEFAULT_TOLERANCE  # noqa: F401 (re-exported)
from benchcert.tasks.items.reduce import ReducedSet, reduced_set
from benchcert.tasks.store.benchmark_matrices import BenchmarkMatrices

#: The power the resolution is stated at (the comparisons' power).
POWER = 0.8
#: Models a strong-model agreement counts: the top third by pooled score, at least this many.
MIN_STRONG = 3
#: Unadjusted p-value under which an item is listed as a candidate (not a flag: no multiplicity control).
CANDIDATE_P = 0.01
#: Items listed in the command's text and the report's flagged table at most.
SHOWN = 30

ITEMS_SCHEMA = {
    "item_id": pl.String, "subject": pl.String, "domain": pl.String, "n_models": pl.Int64,
    "difficulty": pl.Float64, "discrimination": pl.Float64, "irt_slope": pl.Float64,
    "irt_difficulty": pl.Float64, "inert": pl.Boolean, "p_broken_key": pl.Float64, "q_broken_key": pl.Float64,
    "broken_key": pl.Boolean, "strong_agree_non_key": pl.Float64, "in_reduced_set": pl.Boolean,
    "near_duplicate_group": pl.Int64,
}
DUPLICATES_SCHEMA = {"item_a": pl.String, "item_b": pl.String, "jaccard": pl.Float64, "group": pl.Int64}
#: Smallest Jaccard similarity of two items' word 3-shingles reported as near-duplicates.
NEAR_DUPLICATE_JACCARD = 0.8
NEIGHBOURS_SCHEMA = {
    "model_a": pl.String, "model_b": pl.String, "score_a": pl.Float64, "score_b": pl.Float64,
    "gap": pl.Float64, "se": pl.Float64, "p_value": pl.Float64, "verdict": pl.String, "resolution": pl.Float64,
    "alpha": pl.Float64, "power": pl.Float64, "method": pl.String,
}
BANDS_SCHEMA = {
    "band_low": pl.Float64, "band_high": pl.Float64, "n_pairs": pl.Int64, "resolution_median": pl.Float64,
    "resolution_min": pl.Float64, "resolution_max": pl.Float64,
}


@dataclass(frozen=True)
class ItemsSettings:
    """What an item analysis is asked: ``alpha`` (intervals, the resolution's test), ``fdr`` (the
    broken-key flags' level), ``tolerance`` (the reduced set's), ``seed`` (tie-breaks and the
    reduced set's draw), ``hierarchy`` (whether subjects cluster the paired test), ``irt``."""

    alpha: float = 0.05
    fdr: float = DEFAULT_FDR
    tolerance: float = DEFAULT_TOLERANCE
    seed: int = 0
    hierarchy: tuple[str, ...] = ("subject", "domain")
    irt: bool = True


@dataclass(frozen=True)
class ItemsResult:
    """One benchmark's item analysis: the per-item table, the neighbours' resolution and its bands, the
    overview (one row, summary.json's ``item_analysis``), the reduced set, and notes."""

    items: pl.DataFrame
    neighbours: pl.DataFrame
    bands: pl.DataFrame
    overview: dict
    reduced: ReducedSet | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: the repeated samples' components per model (tasks/items/samples.py), when items have several
    samples: pl.DataFrame | None = None
    #: near-duplicate pairs (item texts given), None without texts
    duplicates: pl.DataFrame | None = None

    def tables(self) -> dict[str, pl.DataFrame]:
        """The run's tables (each written as tables/<name>.parquet)."""
        out = {"items": self.items, "items_resolution": self.bands, "items_neighbours": self.neighbours,
               "items_overview": pl.DataFrame([self.overview])}
        if self.reduced is not None:
            out["items_reduced"] = pl.DataFrame([self.reduced.row()])
        if self.samples is not None:
            out["items_samples"] = self.samples
        if self.duplicates is not None:
            out["items_near_duplicates"] = self.duplicates
        return out


def _subjects(m: BenchmarkMatrices, hierarchy) -> np.ndarray | None:
    # as the comparisons: subjects cluster the paired test when the hierarchy has them (and >= 2)
    if "subject" not in hierarchy or m.subjects.height < 2:
        return None
    return m.item_subject


def _resolution(m: BenchmarkMatrices, s: np.ndarray, settings: ItemsSettings):
    if len(m.models) < 2:
        return pl.DataFrame(schema=NEIGHBOURS_SCHEMA), pl.DataFrame(schema=BANDS_SCHEMA), None
    with warnings.catch_warnings():
        # pairs that agree everywhere warn in the comparisons already; here their MDE is their figure
        warnings.simplefilter("ignore")
        res = neighbour_resolution(s, _subjects(m, settings.hierarchy), alpha=settings.alpha, power=POWER)
    names = np.array(m.models, dtype=object)
    neighbours = pl.DataFrame({
        "model_a": names[res.pair_a].tolist(), "model_b": names[res.pair_b].tolist(),
        "score_a": res.mean_a, "score_b": res.mean_b, "gap": res.gap, "se": res.se, "p_value": res.p_value,
        "verdict": [str(v) for v in res.verdict], "resolution": res.mde,
        "alpha": [res.alpha] * res.mde.size, "power": [res.power] * res.mde.size,
        "method": [res.method] * res.mde.size}, schema=NEIGHBOURS_SCHEMA)
    bands = band_resolution(res)
    return neighbours, (pl.DataFrame(bands, schema=BANDS_SCHEMA) if bands else pl.DataFrame(schema=BANDS_SCHEMA)), res


def _irt(s: np.ndarray, binary: bool, enabled: bool, notes: list[str]):
    n_models = s.shape[1]
    nan = np.full(s.shape[0], np.nan)
    if not enabled:
        return nan, nan
    if not binary:
        notes.append("items: the 2PL fit needs 0/1 scores; this benchmark has fractional scores (not fitted)")
        return nan, nan
    if n_models < MIN_MODELS:
        notes.append(f"items: {n_models} models (fewer than {MIN_MODELS}): the 2PL slopes and difficulties are not "
                     "fitted; the item-rest correlation is the discrimination")
        return nan, nan
    fit = fit_2pl(s)
    if not fit.converged:
        notes.append(f"items: the 2PL fit stopped after {fit.iterations} EM iterations without converging")
    return fit.a, fit.b


def analyze_items(m: BenchmarkMatrices, settings: ItemsSettings, *, choices: pl.DataFrame | None = None,
                  texts: pl.DataFrame | None = None) -> ItemsResult:
    """The item analysis of ``m`` (see the module's docstring).

    ``choices`` (model, item_id, choice, key) are the options the models chose, where the logs
    carry them: the share of strong models agreeing on one non-key answer is added to each item.
    ``texts`` (item_id, text): the items' texts, for the near-duplicates (none without them).

    Raises
    ------
    NotAnalysableError
        Fewer than 3 models: no item statistic across models is defined.
    """
    s = m.scores
    if len(m.models) < 3:
        raise NotAnalysableError(f"the item analysis needs at least 3 models; the benchmark has {len(m.models)}")
    notes: list[str] = []
    st = item_statistics(s)
    bk = broken_key_test(s, level=settings.fdr, rng=np.random.default_rng(settings.seed))
    if (~st.binary).any():
        notes.append(f"items: {int((~st.binary).sum())} item(s) with fractional scores are not tested for a broken key "
                     "(the test is for 0/1 items)")
    a, b = _irt(s, bool(st.binary.all()), settings.irt, notes)
    answered = ~np.isnan(s)
    cells = answered.sum(axis=1)
    total_calls = int(cells.sum())
    inert_calls = int(cells[st.inert].sum())
    neighbours, bands, _ = _resolution(m, s, settings)
    rel = reliability(s, alpha=settings.alpha)
    sat = saturation(s)
    red = reduced_set(m, st.inert, tolerance=settings.tolerance, alpha=settings.alpha, seed=settings.seed)
    in_red = np.zeros(m.n_items, dtype=bool)
    if red is not None:
        in_red[red.rows] = True
        notes += list(red.notes)
    agree = _strong_agreement(m, choices) if choices is not None else np.full(m.n_items, np.nan)
    items = m.items.with_columns(
        pl.Series("n_models", st.n_models, dtype=pl.Int64), pl.Series("difficulty", st.difficulty),
        pl.Series("discrimination", st.discrimination, nan_to_null=True),
        pl.Series("irt_slope", a, nan_to_null=True), pl.Series("irt_difficulty", b, nan_to_null=True),
        pl.Series("inert", st.inert), pl.Series("p_broken_key", bk.p_value, nan_to_null=True),
        pl.Series("q_broken_key", bk.q_value, nan_to_null=True), pl.Series("broken_key", bk.flagged),
        pl.Series("strong_agree_non_key", agree, nan_to_null=True),
        pl.Series("in_reduced_set", in_red), pl.Series("near_duplicate_group", [None] * m.n_items,
                                                        dtype=pl.Int64)).cast(ITEMS_SCHEMA)
    duplicates = None
    if texts is not None:
        items, duplicates = _near_duplicates(items, texts)
    else:
        notes.append("items: near-duplicates not looked for: the store holds no item text (benchcert items --texts)")
    candidates = np.nan_to_num(bk.p_value, nan=1.0) <= CANDIDATE_P
    flagged_agree = agree[bk.flagged]
    other_agree = agree[~bk.flagged & ~st.inert]
    overview = {
        "n_items": m.n_items, "n_models": len(m.models), "n_inert": int(st.inert.sum()),
        "n_inert_all_correct": int((st.inert & (st.difficulty == 1)).sum()),
        "n_inert_all_wrong": int((st.inert & (st.difficulty == 0)).sum()),
        "inert_call_share": inert_calls / total_calls if total_calls else None,
        "n_tested_broken_key": bk.n_tested, "n_broken_key": int(bk.flagged.sum()), "fdr": bk.level,
        "broken_key_method": bk.method, "n_negative_discrimination": int(np.nansum(st.discrimination < 0)),
        "n_could_be_flagged": int(np.nansum(bk.min_p <= bk.level / max(1, bk.n_tested))),
        "candidate_p": CANDIDATE_P, "n_candidates": int(candidates.sum()),
        "strong_agree_non_key_flagged": _nanmean(flagged_agree), "strong_agree_non_key_other": _nanmean(other_agree),
        "strong_agree_non_key_candidates": _nanmean(agree[candidates]),
        "strong_agree_non_key_not_candidates": _nanmean(agree[~candidates & ~st.inert]),
        "reliability": _finite(rel.estimate), "reliability_lower": _finite(rel.lower),
        "reliability_upper": _finite(rel.upper), "reliability_items": rel.n_items, "sem": _finite(rel.sem),
        "alpha": settings.alpha, "power": POWER,
        "resolution_median": _finite(float(neighbours["resolution"].median())) if neighbours.height else None,
        "n_neighbours_resolved": int((neighbours["verdict"] != "inconclusive").sum()) if neighbours.height else 0,
        "top_score": sat.top_score, "headroom": sat.headroom, "n_top": sat.n_top,
        "separating_items_top": sat.separating_items, "all_missed_items_top": sat.all_missed_items,
        "irt_fitted": int(np.isfinite(a).sum()),
        "reduced_n": red.n_evaluated if red is not None else None,
        "reduced_calls_saved_share": red.calls_saved_share if red is not None else None,
        "tolerance": settings.tolerance,
        "n_near_duplicate_pairs": None if duplicates is None else duplicates.height,
        "n_near_duplicate_items": None if duplicates is None else int(items["near_duplicate_group"].is_not_null().sum()),
        "near_duplicate_jaccard": NEAR_DUPLICATE_JACCARD,
    }
    if _subjects(m, settings.hierarchy) is not None and m.subjects.height < MIN_SUBJECTS_CLUSTERED:
        notes.append(f"items: {m.subjects.height} subjects: the resolution is that of the items question (subjects as "
                     "fixed strata), as in the comparisons")
    return ItemsResult(items, neighbours, bands, overview, red, tuple(notes), duplicates=duplicates)


def _near_duplicates(items: pl.DataFrame, texts: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The items table with each near-duplicate's group (the smallest item row of its group), and the
    pairs; items without a text take part in none."""
    from benchcert.stats.near_duplicates import near_duplicates

    text = items.select("item_id").join(texts, on="item_id", how="left", maintain_order="left")["text"].to_list()
    nd = near_duplicates(text, threshold=NEAR_DUPLICATE_JACCARD)
    ids = items["item_id"]
    pairs = pl.DataFrame({"item_a": ids.gather(pl.Series(nd.a, dtype=pl.UInt32)),
                          "item_b": ids.gather(pl.Series(nd.b, dtype=pl.UInt32)), "jaccard": nd.jaccard,
                          "group": nd.group[nd.a] if nd.a.size else np.zeros(0, dtype=np.int64)},
                         schema=DUPLICATES_SCHEMA)
    group = pl.Series("near_duplicate_group", np.where(nd.group >= 0, nd.group, -1)).replace(-1, None)
    return items.with_columns(group.cast(pl.Int64)), pairs


def _nanmean(v: np.ndarray) -> float | None:
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else None


def _strong_agreement(m: BenchmarkMatrices, choices: pl.DataFrame) -> np.ndarray:
    """Per item, among the strong models (top third by pooled score, at least :data:`MIN_STRONG`) that
    answered it with a non-key choice, the largest share of all strong models that chose one and
    the same non-key option (NaN when no strong model's choice is known)."""
    means = np.nanmean(m.scores, axis=0)
    k = max(MIN_STRONG, len(m.models) // 3)
    strong = [m.models[j] for j in np.argsort(-means, kind="stable")[:k]]
    c = (choices.filter(pl.col("model").is_in(strong))
         .with_columns(pl.col("choice").cast(pl.String), pl.col("key").cast(pl.String))
         .filter(pl.col("choice").is_not_null() & (pl.col("choice") != "")))
    n_strong = c.group_by("item_id").agg(pl.len().alias("n"))
    top = (c.filter(pl.col("choice") != pl.col("key")).group_by("item_id", "choice").agg(pl.len().alias("c"))
           .group_by("item_id").agg(pl.col("c").max()))
    share = (n_strong.join(top, on="item_id", how="left")
             .with_columns((pl.col("c").fill_null(0) / pl.col("n")).alias("share")))
    out = m.items.select("item_id").join(share.select("item_id", "share"), on="item_id", how="left",
                                          maintain_order="left")
    return out["share"].cast(pl.Float64).fill_null(float("nan")).to_numpy()


@dataclass(frozen=True)
class ItemsRequest:
    """``benchcert items``: the store, the benchmark and variant, the settings, and where the logs'
    chosen options are (``choices``: a CSV file and the columns of model, item id, choice and key)."""

    db: str
    benchmark: str
    variant: str | None = None
    settings: ItemsSettings = ItemsSettings()
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    choices: str | None = None
    choice_columns: tuple[tuple[str, str], ...] = ()
    texts: str | None = None
    text_columns: tuple[tuple[str, str], ...] = ()


def check_settings(settings: ItemsSettings) -> None:
    """The settings' levels, each refused as the option that gave it."""
    from benchcert.tasks.errors import unit_interval_option

    unit_interval_option("--alpha", settings.alpha)
    unit_interval_option("--fdr", settings.fdr)
    unit_interval_option("--tolerance", settings.tolerance)


def run_items(request: ItemsRequest) -> tuple[ItemsResult, str]:
    """Read the benchmark from the store and analyse its items; returns the result and the variant read.

    Raises the store's errors (missing, locked), the matrices' NoDataError (unknown benchmark or
    variant), :class:`~benchcert.tasks.errors.UsageError` for a bad setting and
    :class:`~benchcert.tasks.items.choices.ChoicesError` for a choices file that cannot be used.
    """
    from benchcert.tasks.items.choices import read_choices, read_texts
    from benchcert.tasks.store.connection import open_store, require_store
    from benchcert.tasks.store.matrices import load_matrices

    check_settings(request.settings)
    choices = read_choices(request.choices, dict(request.choice_columns)) if request.choices else None
    texts = read_texts(request.texts, dict(request.text_columns)) if request.texts else None
    require_store(request.db)
    with open_store(request.db, write=False, lock_timeout=request.lock_timeout) as con:
        m = load_matrices(con, request.benchmark, request.variant)
    result = analyze_items(m, request.settings, choices=choices, texts=texts)
    if m.n_replicates.max(initial=0) > 1:
        import dataclasses

        from benchcert.tasks.items.samples import components_table, read_samples

        samples, _ = read_samples(request.db, request.benchmark, m.variant, request.lock_timeout)
        result = dataclasses.replace(result, samples=components_table(samples, alpha=request.settings.alpha,
                                                                       seed=request.settings.seed))
    return result, m.variant
