"""Repeated samples per item (several responses of a model to one item: ``replicate`` in the canonical
row): the variance components of each model, its unstable items, pass@k and mean@k, and
``benchcert plan samples``. The one home of their rules; the formulas are stats/replicates.py.

The store keeps every replicate (table ``response_codes``); the audit's analyses average them per
item, which keeps their intervals valid (an item mean's variance already holds the within-item
part; Miller 2024, sec. 2.5). What the components add is the split: how much of a score's
uncertainty is run-to-run noise, and how many samples per item are worth drawing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from benchcert.stats.replicates import pass_at_k, plan_samples, variance_components
from benchcert.tasks.errors import NoDataError, UsageError, unit_interval_option
from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT

#: Bootstrap resamples of the between components' intervals.
N_BOOT = 400

SAMPLES_SCHEMA = {
    "model": pl.String, "n_items": pl.Int64, "mean_samples": pl.Float64, "min_samples": pl.Int64,
    "mean": pl.Float64, "within": pl.Float64, "within_lower": pl.Float64, "within_upper": pl.Float64,
    "between_items": pl.Float64, "between_items_lower": pl.Float64, "between_items_upper": pl.Float64,
    "between_subjects": pl.Float64, "between_subjects_lower": pl.Float64, "between_subjects_upper": pl.Float64,
    "within_share": pl.Float64, "unstable_items": pl.Int64, "k": pl.Int64, "pass_at_k": pl.Float64,
    "pass_lower": pl.Float64, "pass_upper": pl.Float64, "mean_at_k_lower": pl.Float64,
    "mean_at_k_upper": pl.Float64, "alpha": pl.Float64,
}


class NoReplicatesError(NoDataError):
    """The benchmark (or the model) has no item with more than one sample (exit code 1)."""


def read_samples(db, benchmark: str, variant: str | None, lock_timeout: float = DEFAULT_LOCK_TIMEOUT
                 ) -> tuple[pl.DataFrame, str]:
    """Per (model, item) of the chosen variant: samples ``r``, sum ``s1`` and sum of squares ``s2`` of
    the scores, with the item's subject; and the variant read."""
    from benchcert.tasks.store.connection import open_store, require_store
    from benchcert.tasks.store.items import benchmark_items
    from benchcert.tasks.store.matrices import choose_variant
    from benchcert.tasks.store.variant_counts import read_variant_counts

    require_store(db)
    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        chosen = choose_variant(con, benchmark, variant)
        counts = read_variant_counts(con, benchmark)
        items = benchmark_items(con, benchmark)
    rows = counts.filter(pl.col("variant") == chosen)
    rows = rows.with_columns(
        pl.when(pl.col("binary")).then(pl.col("s").cast(pl.Float64))
        .otherwise(pl.col("scores").list.eval(pl.element() * pl.element()).list.sum()).alias("s2"))
    out = (rows.select("model", "item_id", pl.col("r").cast(pl.Int64), pl.col("k").cast(pl.Float64).alias("s1"),
                       pl.col("s2").cast(pl.Float64), "binary")
           .join(items.select("item_id", "subject"), on="item_id", how="left"))
    return out, chosen


def components_table(samples: pl.DataFrame, *, alpha: float, seed: int, k: int | None = None) -> pl.DataFrame:
    """One row per model with repeated samples (some item with 2 or more): the components with their
    intervals, the within-item share of an item mean's variance at the model's samples per item, the
    unstable items (samples that disagree), pass@k (0/1 scores; k = the fewest samples of an item
    unless given) and mean@k's interval."""
    rows = []
    rng = np.random.default_rng(seed)
    for model, g in samples.sort("model", "item_id").group_by("model", maintain_order=True):
        g = g.filter(pl.col("r") >= 1)
        if g.height == 0 or g["r"].max() < 2:
            continue
        codes = g["subject"].fill_null("").rank("dense").cast(pl.Int64).to_numpy() - 1
        n, s1, s2 = g["r"].to_numpy(), g["s1"].to_numpy(), g["s2"].to_numpy()
        vc = variance_components(n, s1, s2, codes, alpha=alpha, n_boot=N_BOOT, rng=rng)
        kk = int(k) if k is not None else int(n.min())
        binary = bool(g["binary"].all())
        pk = pass_at_k(n, s1, k=max(1, kk), alpha=alpha) if binary else None
        noise = vc.within / vc.mean_samples
        total = max(vc.between_items, 0.0) + noise
        rows.append({
            "model": model[0], "n_items": vc.n_items, "mean_samples": vc.mean_samples, "min_samples": int(n.min()),
            "mean": vc.mean, "within": vc.within, "within_lower": vc.within_lower, "within_upper": vc.within_upper,
            "between_items": vc.between_items, "between_items_lower": vc.between_items_lower,
            "between_items_upper": vc.between_items_upper, "between_subjects": vc.between_subjects,
            "between_subjects_lower": vc.between_subjects_lower, "between_subjects_upper": vc.between_subjects_upper,
            "within_share": noise / total if total > 0 else None,
            "unstable_items": int(np.nansum(vc.item_within > 0)), "k": kk if binary else None,
            "pass_at_k": pk.pass_at_k if pk else None, "pass_lower": pk.pass_lower if pk else None,
            "pass_upper": pk.pass_upper if pk else None,
            "mean_at_k_lower": pk.mean_lower if pk else None, "mean_at_k_upper": pk.mean_upper if pk else None,
            "alpha": alpha})
    clean = [{k_: (None if isinstance(v, float) and not np.isfinite(v) else v) for k_, v in r.items()} for r in rows]
    return pl.DataFrame(clean, schema=SAMPLES_SCHEMA) if clean else pl.DataFrame(schema=SAMPLES_SCHEMA)


@dataclass(frozen=True)
class SamplesPlanRequest:
    """``benchcert plan samples``: where the pilot is, whose components, and the budget and costs."""

    db: str
    benchmark: str
    budget: float
    model: str | None = None
    variant: str | None = None
    cost_item: float = 0.0
    cost_sample: float = 1.0
    alpha: float = 0.05
    these_items: bool = False
    seed: int = 0
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT


def samples_plan(request: SamplesPlanRequest) -> dict:
    """The plan of each model with repeated samples (or of ``model``), from its measured components.

    Raises
    ------
    UsageError
        A budget or cost out of range.
    NoReplicatesError
        No model (or not ``model``) has an item with 2 or more samples.
    """
    unit_interval_option("--alpha", request.alpha)
    if not (request.budget > 0 and request.cost_sample > 0 and request.cost_item >= 0):
        raise UsageError(f"--budget and --cost-sample must be > 0 and --cost-item >= 0; got {request.budget}, "
                         f"{request.cost_sample}, {request.cost_item}")
    if request.budget < request.cost_item + request.cost_sample:
        raise UsageError(f"--budget {request.budget:g} buys no sample (one item with one sample costs "
                         f"{request.cost_item + request.cost_sample:g})")
    samples, variant = read_samples(request.db, request.benchmark, request.variant, request.lock_timeout)
    if request.model is not None:
        samples = samples.filter(pl.col("model") == request.model)
    table = components_table(samples, alpha=request.alpha, seed=request.seed)
    if table.height == 0:
        who = f"model {request.model!r}" if request.model else "no model"
        raise NoReplicatesError(f"{who} of benchmark {request.benchmark!r} (variant {variant!r}) has repeated samples "
                                "(an item answered twice or more: the canonical row's replicate); nothing to plan from"
                                if request.model is None else
                                f"{who} has no repeated samples in benchmark {request.benchmark!r} (variant {variant!r})")
    n_items = samples["item_id"].n_unique()
    plans = []
    for r in table.iter_rows(named=True):
        between = max(r["between_items"] or 0.0, 0.0) + max(r["between_subjects"] or 0.0, 0.0)
        p = plan_samples(between, max(r["within"] or 0.0, 0.0), budget=request.budget, n_items=n_items,
                         cost_item=request.cost_item, cost_sample=request.cost_sample, alpha=request.alpha,
                         these_items=request.these_items)
        plans.append({"model": r["model"], "k": p.k, "n": p.n, "cost": p.cost, "half_width": p.half_width,
                      "k_continuous": p.k_continuous if np.isfinite(p.k_continuous) else None,
                      "between": between, "within": r["within"], "method": p.method,
                      "assumptions": list(p.assumptions)})
    return {"benchmark": request.benchmark, "variant": variant, "budget": request.budget,
            "cost_item": request.cost_item, "cost_sample": request.cost_sample, "alpha": request.alpha,
            "n_items": n_items, "these_items": request.these_items, "plans": plans,
            "components": table.to_dicts()}
