"""Subset manifests: evaluate a new checkpoint on a seeded random subset, then certify it.

``benchcert subsample`` draws a uniform (or subject-stratified) subset of n item ids of a
benchmark from the store, records it (tables ``subsets`` and ``subset_items``, created on
first use) and writes a manifest to run cheaply. Once the checkpoint's logs for exactly
those items are ingested, the audit (tasks/subsample/analysis.py) finds the model through
:func:`subset_estimates` and reports its estimated full-benchmark score with the Theorem
5.2 guarantee and the exact post-hoc interval.

The guarantee needs the subset to be drawn at random *before* evaluation and independently
of the results: that is what the recorded manifest attests, and why a model that merely
answered fewer items gets no guarantee.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from benchcert.stats.subsample import (
    posthoc_interval,
    proportional_allocation,
    stratified_halfwidth,
    theorem_5_2_halfwidth,
)
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT, open_store
from benchcert.tasks.errors import NoDataError, UsageError
from benchcert.tasks.store.items import benchmark_items, benchmarks_with_items, item_count
from benchcert.tasks.store.matrices import BenchmarkMatrices
from benchcert.tasks.store.subsets import read_subsets, record_subset

__all__ = ["SubsetManifest", "SubsetError", "NoSubsetItems", "benchmarks_with_items", "item_count",
           "benchmark_items", "draw_subset", "create_subset", "load_subsets", "load_subsets_from_db",
           "subset_estimates", "ESTIMATE_SCHEMA"]

ESTIMATE_SCHEMA = {
    "model": pl.String, "subset_id": pl.String, "n": pl.Int64, "N": pl.Int64, "seed": pl.Int64,
    "stratified": pl.Boolean, "k": pl.Float64, "estimate": pl.Float64, "method": pl.String, "lower": pl.Float64,
    "upper": pl.Float64, "half_width": pl.Float64, "alpha": pl.Float64, "note": pl.String,
}


class SubsetError(UsageError):
    """A subset cannot be drawn as asked (n outside [1, N], too few items for the strata; exit code 2)."""


class NoSubsetItems(NoDataError, SubsetError):
    """The benchmark has no items to draw from (empty or unknown): the data's problem, not the options'
    (exit code 1, NoDataError's, which comes first)."""


@dataclass(frozen=True)
class SubsetManifest:
    """A recorded random subset of a benchmark's items.

    ``strata`` (stratified subsets only) maps subject -> (items in the benchmark, items drawn),
    which fixes the stratum weights m_k/N of the stratified estimator.
    """

    subset_id: str
    benchmark: str
    n: int
    N: int
    seed: int
    stratified: bool
    created_at: str
    items: pl.DataFrame = field(repr=False)  # item_id, subject, domain
    strata: dict[str, tuple[int, int]] | None = None

    def to_dict(self, *, with_items: bool = True) -> dict:
        out = {"subset_id": self.subset_id, "benchmark": self.benchmark, "n": self.n, "N": self.N,
               "seed": self.seed, "stratified": self.stratified, "created_at": self.created_at,
               "cost_fraction": self.n / self.N}
        if self.strata is not None:
            out["strata"] = {k: {"items": v[0], "drawn": v[1]} for k, v in self.strata.items()}
        if with_items:
            out["item_ids"] = self.items["item_id"].to_list()
        return out


def _subset_id(benchmark: str, item_ids: list[str], stratified: bool) -> str:
    h = hashlib.sha256()
    h.update(benchmark.encode("utf-8") + b"\0" + (b"s" if stratified else b"u") + b"\0")
    for i in sorted(item_ids):
        h.update(i.encode("utf-8") + b"\n")
    return "sub-" + h.hexdigest()[:16]


def draw_subset(items: pl.DataFrame, n: int, *, seed: int, stratified: bool = False
                ) -> tuple[pl.DataFrame, dict[str, tuple[int, int]] | None]:
    """Draw n items uniformly (or proportionally per subject) with ``numpy.random.default_rng(seed)``.

    ``items`` must hold item_id, subject, domain. The draw depends only on the seed and the
    sorted item ids (and subjects), so the same store and seed give the same subset.
    Returns the drawn rows (sorted by item_id) and, when stratified, the strata table.
    """
    N = items.height
    if N == 0:
        raise NoSubsetItems("the benchmark has no items; ingest its logs first")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise SubsetError(f"n must be an integer; got {n!r}")
    if n < 1:
        raise SubsetError(f"n must be >= 1 (a subset needs at least one item); got {n}")
    if n > N:
        raise SubsetError(f"n must be <= N = {N}, the benchmark's item count; got {n}")
    items = items.sort("item_id")
    rng = np.random.default_rng(seed)
    if not stratified:
        idx = np.sort(rng.choice(N, size=int(n), replace=False))
        return items[idx], None
    strata = items.sort("domain", "subject", "item_id").with_row_index("row")
    groups = strata.group_by("subject", maintain_order=True).agg(pl.col("row"))
    sizes = np.array([len(r) for r in groups["row"].to_list()])
    try:
        alloc = proportional_allocation(sizes, int(n))
    except ValueError as exc:
        raise SubsetError(f"stratified subset: {exc}") from None
    picked = []
    for rows, k in zip(groups["row"].to_list(), alloc.tolist()):
        picked.append(np.asarray(rows)[rng.choice(len(rows), size=k, replace=False)])
    rows = np.concatenate(picked)
    table = {s: (int(m), int(k)) for s, m, k in zip(groups["subject"].to_list(), sizes.tolist(), alloc.tolist())}
    return strata[np.sort(rows)].drop("row").sort("item_id"), table


def create_subset(db, benchmark: str, n: int, *, seed: int | None = None, stratified: bool = False,
                  lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> SubsetManifest:
    """Draw a subset of the benchmark's items and record it in the store (idempotent per draw)."""
    if seed is None:
        seed = secrets.randbits(63)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2 ** 63:
        raise SubsetError(f"seed must be an integer in [0, 2^63); got {seed!r}")
    with open_store(db, write=True, lock_timeout=lock_timeout) as con:
        items = benchmark_items(con, benchmark)
        if items.height == 0:
            raise NoSubsetItems(f"benchmark {benchmark!r} has no items in the store (empty or unknown); "
                                f"benchmarks stored: {benchmarks_with_items(con)}")
        drawn, strata = draw_subset(items, n, seed=int(seed), stratified=stratified)
        sid = _subset_id(benchmark, drawn["item_id"].to_list(), stratified)
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
        strata_json = json.dumps(strata, sort_keys=True) if strata is not None else None
        now = record_subset(con, {"subset_id": sid, "benchmark": benchmark, "n_items": int(n),
                                  "n_benchmark": items.height, "seed": int(seed), "stratified": bool(stratified),
                                  "strata": strata_json, "created_at": now}, drawn)
    return SubsetManifest(subset_id=sid, benchmark=benchmark, n=int(n), N=items.height, seed=int(seed),
                          stratified=bool(stratified), created_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"), items=drawn,
                          strata=strata)


def load_subsets(con, benchmark: str) -> list[SubsetManifest]:
    """Every recorded subset of the benchmark (none when no subset was ever drawn)."""
    stored = read_subsets(con, benchmark)
    if stored is None or stored[0].height == 0:
        return []
    heads, rows = stored
    out = []
    for h in heads.iter_rows(named=True):
        strata = json.loads(h["strata"]) if h["strata"] else None
        out.append(SubsetManifest(
            subset_id=h["subset_id"], benchmark=benchmark, n=int(h["n_items"]), N=int(h["n_benchmark"]),
            seed=int(h["seed"]), stratified=bool(h["stratified"]), created_at=h["created_at"],
            items=rows.filter(pl.col("subset_id") == h["subset_id"]).drop("subset_id"),
            strata=({k: (int(v[0]), int(v[1])) for k, v in strata.items()} if strata else None)))
    return out


def load_subsets_from_db(db, benchmark: str, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> list[SubsetManifest]:
    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        return load_subsets(con, benchmark)


def _estimate_rows(model: str, man: SubsetManifest, scores: pl.DataFrame, alpha: float) -> list[dict]:
    """Estimated full score of one model evaluated on one recorded subset, with its intervals."""
    base = {"model": model, "subset_id": man.subset_id, "n": man.n, "N": man.N, "seed": man.seed,
            "stratified": man.stratified, "alpha": alpha}
    s = scores["score"].to_numpy()
    k = float(s.sum())
    binary = bool(np.all((s == 0.0) | (s == 1.0)))
    rows = []
    if man.stratified:
        by = scores.group_by("subject").agg(pl.col("score").mean().alias("mean"))
        means = dict(zip(by["subject"].to_list(), by["mean"].to_list()))
        subjects = sorted(man.strata)
        est = sum(man.strata[j][0] / man.N * means[j] for j in subjects)
        hw = stratified_halfwidth([man.strata[j][0] for j in subjects], [man.strata[j][1] for j in subjects],
                                  alpha=alpha).half_width
        rows.append({**base, "k": k, "estimate": est, "method": "subsample_stratified",
                     "lower": max(est - hw, 0.0), "upper": min(est + hw, 1.0), "half_width": hw,
                     "note": "stratified estimator sum_k (m_k/N) mean_k with the per-stratum Hoeffding-Serfling "
                             "proxy (docs/methods.md, section 4); no exact interval for stratified subsets"})
        return rows
    est = k / man.n
    hw = float(theorem_5_2_halfwidth(man.n, man.N, alpha=alpha).half_width)
    # The full count lies in [k, N - (n - k)] whatever the unseen items hold, so clipping keeps coverage.
    lo_f, hi_f = k / man.N, (man.N - man.n + k) / man.N
    rows.append({**base, "k": k, "estimate": est, "method": "subsample_theorem_5_2",
                 "lower": max(est - hw, lo_f, 0.0), "upper": min(est + hw, hi_f, 1.0), "half_width": hw,
                 "note": "Theorem 5.2: guarantee for the full-benchmark pooled score under exchangeability"})
    if binary:
        p = posthoc_interval(int(round(k)), man.n, man.N, alpha=alpha)
        rows.append({**base, "k": k, "estimate": est, "method": "subsample_exact",
                     "lower": float(p.lower), "upper": float(p.upper), "half_width": float(p.half_width),
                     "note": f"exact hypergeometric interval for the full count K in [{p.K_lower}, {p.K_upper}]"})
    else:
        rows.append({**base, "k": k, "estimate": est, "method": "subsample_exact", "lower": None, "upper": None,
                     "half_width": None, "note": "scores are not all 0/1: the exact interval needs binary scores"})
    return rows


def subset_estimates(matrices: BenchmarkMatrices | pl.DataFrame, subsets: list[SubsetManifest], *,
                     alpha: float) -> pl.DataFrame:
    """Models whose answered items are exactly a recorded subset, with estimate and intervals.

    ``matrices`` is the audit's :class:`~benchcert.tasks.store.matrices.BenchmarkMatrices` (a long
    frame model, item_id, subject, domain, score is accepted too). A model that answered
    exactly the items of a manifest gets rows ``subsample_theorem_5_2`` and
    ``subsample_exact`` (or ``subsample_stratified``); the intervals are about its score on
    the full benchmark as it was when the subset was drawn (N items).
    """
    m = matrices if isinstance(matrices, BenchmarkMatrices) else BenchmarkMatrices("", "", matrices)
    rows: list[dict] = []
    if not subsets or m.n_items == 0 or not m.models:
        return pl.DataFrame(schema=ESTIMATE_SCHEMA)
    # Work on the score matrix: no per-model filtering of a long frame, no joins on strings.
    answered = ~np.isnan(m.scores)
    n_answered = answered.sum(axis=0)
    items = m.items.with_row_index("row")
    for man in subsets:
        picked = items.join(man.items.select("item_id").unique(), on="item_id", how="semi", maintain_order="left")
        idx = picked["row"].to_numpy()
        hits = answered[idx].sum(axis=0)
        for j in np.flatnonzero((hits == man.n) & (n_answered == man.n)):  # models in sorted order
            scores = pl.DataFrame({"item_id": picked["item_id"], "subject": picked["subject"],
                                   "score": m.scores[idx, j]})
            rows.extend(_estimate_rows(m.models[j], man, scores, alpha))
    return pl.DataFrame(rows, schema=ESTIMATE_SCHEMA) if rows else pl.DataFrame(schema=ESTIMATE_SCHEMA)
