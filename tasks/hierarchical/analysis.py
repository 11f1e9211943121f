"""Hierarchical exchangeable intervals and the diagnostics behind them (exchangeable-bounds paper, sections 6-7).

Per model: macro and pooled (and user-weighted) intervals from Corollary 6.1 with
beta-binomial proxies per domain, reported as method ``"hierarchical"`` beside the
comparator intervals (the exchangeable-bounds paper's Table 3 layout), their three variance
components, and every domain fit with its degenerate flag. Per benchmark: split-half
correlations within domains (Table 2 layout) and the model-centred subject correlation
matrix (Figure 3, a domain-ordered heatmap).

Tables: ``hierarchical_components``, ``domain_fits``, ``split_half``, ``subject_correlation``.
Its report sections are :mod:`benchcert.tasks.render.sections.hierarchical`, its command-line settings
:mod:`benchcert.tasks.hierarchical.settings`.  With the models split into blocks (out of core,
Dask) it runs as :func:`model_block` per block, :func:`split_part` on the whole matrix and
:func:`assemble` (its registry entry's blocked form).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

import numpy as np
import polars as pl

from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.split_half import SplitHalfResult, split_half
from benchcert.stats.subject_correlation import subject_correlation
from benchcert.stats.hierarchical import PROXY_SHARE, DomainFits, HierarchicalBound, fit_domains, hierarchical_bound
from benchcert.stats.comparator_intervals import comparator_intervals_both, comparator_intervals_counts
from benchcert.stats.intervals import IntervalResult
from benchcert.stats.same_subjects import SameSubjectsInterval, same_subjects_from_sums, subject_sums
from benchcert.tasks.audit.contract import INTERVAL_SCHEMA, AnalysisOutput, AuditConfig
from benchcert.tasks.audit.headline import headline_frame
from benchcert.tasks.store.matrices import BenchmarkMatrices
from benchcert.tasks.render.sections.hierarchical import Fitted, sections
from benchcert.tasks.hierarchical.settings import N_SPLITS, SPLIT_MC_TOL, SPLIT_ROUND, SPLIT_SEED

ALL_SUBJECTS = "(all subjects)"

COMPONENT_SCHEMA = {
    "model": pl.String, "metric": pl.String, "hierarchy": pl.String, "estimate": pl.Float64,
    "sigma2_item": pl.Float64, "sigma2_subj": pl.Float64, "sigma2_dom": pl.Float64, "sigma2_eff": pl.Float64,
    "half_width": pl.Float64, "lower": pl.Float64, "upper": pl.Float64, "alpha": pl.Float64,
    "n_items": pl.Int64, "n_subjects": pl.Int64,
}
FIT_SCHEMA = {
    "model": pl.String, "domain": pl.String, "K_d": pl.Int64, "n_items": pl.Int64, "mean": pl.Float64,
    "a": pl.Float64, "b": pl.Float64, "nu": pl.Float64, "s2": pl.Float64, "icc": pl.Float64,
    "loglik": pl.Float64, "method": pl.String, "status": pl.String, "degenerate": pl.Boolean,
    "reason": pl.String, "used_in_bound": pl.Boolean, "nu_lower": pl.Float64, "s2_upper": pl.Float64,
    "upper_alpha": pl.Float64,
}
SPLIT_SCHEMA = {
    "model": pl.String, "domain": pl.String, "n_subjects": pl.Int64, "corr": pl.Float64, "sd": pl.Float64,
    "mc_se": pl.Float64, "n_valid_splits": pl.Int64, "n_splits": pl.Int64, "negative": pl.Boolean, "status": pl.String,
}
CORR_SCHEMA = {
    "subject_i": pl.String, "domain_i": pl.String, "subject_j": pl.String, "domain_j": pl.String,
    "corr": pl.Float64, "n_models": pl.Int64,
}


# ---------------------------------------------------------------------------------------------
# the analysis


def _hierarchy_name(levels: tuple[str, ...]) -> str:
    return ",".join(levels) if levels else "none"


_RESTATED = ("beta_binomial_mle:", "beta_mle_on_subject_means:", "split_half:", "fit_domains:",
             "hierarchical_bound:", "subject_correlation:")


def _short_list(items: list[str], limit: int = 8) -> str:
    return ", ".join(items[:limit]) + (f" ... ({len(items)} in all)" if len(items) > limit else "")


def _data_warnings(m: BenchmarkMatrices, fits, weights: np.ndarray | None, corr) -> list[str]:
    """Named versions of the stats layer's data warnings that do not live in a table."""
    models, names = m.models, m.subjects["subject"].to_list()
    out = []
    single = np.argwhere(fits.n == 1)
    if single.size:
        out.append("subject(s) with a single answered item (their accuracy is 0 or 1 and informs only the domain "
                   "mean): " + _short_list([f"{models[j]} / {names[k]}" for k, j in single]))
    missing = np.argwhere(fits.n == 0)
    if missing.size:
        out.append("model(s) answered none of a subject, which is left out of their scores and fits: "
                   + _short_list([f"{models[j]} / {names[k]}" for k, j in missing]))
    if weights is not None:
        partial = ((weights[:, None] > 0) & (fits.n == 0)).any(axis=0)
        if partial.any():
            out.append("weighted score: weights renormalised over the answered subjects for "
                       + _short_list([models[j] for j in np.flatnonzero(partial)]))
    if corr is not None and corr.negative_within.any():
        doms = list(m.domains)
        out.append("model-centred subject correlation: negative mean within-domain correlation (descriptive "
                   "evidence that the domain's subjects share no common factor) in "
                   + _short_list([f"{doms[d]} ({corr.within_domain_mean[d]:.2f})"
                                  for d in np.flatnonzero(corr.negative_within)]))
    if corr is not None and not np.diag(corr.defined).all():
        out.append("subject correlation undefined (constant centred profile across models) for "
                   + _short_list([names[k] for k in np.flatnonzero(~np.diag(corr.defined))]))
    return out


def _named_warnings(caught, fits_frame: pl.DataFrame, split_frame: pl.DataFrame) -> list[str]:
    """Replace index-based stats warnings by messages that name models and domains."""
    msgs = []
    for w in caught:
        text = str(w.message)
        if issubclass(w.category, DegenerateDataWarning) and text.startswith(_RESTATED):
            continue  # restated by name (the stats layer only knows row and column numbers)
        msgs.append(f"{w.category.__name__}: {text}")
    bad = fits_frame.filter(pl.col("degenerate"))
    for status, group in bad.group_by("status", maintain_order=True):
        pairs = [f"{r['model']} / {r['domain']}" for r in group.head(8).iter_rows(named=True)]
        more = f" ... ({group.height} in all)" if group.height > 8 else ""
        msgs.append(f"domain fit {status[0]} in {group.height} (model / domain) fit(s): {', '.join(pairs)}{more}: "
                    f"{group['reason'][0]}")
    neg = split_frame.filter(pl.col("negative"))
    if neg.height:
        pairs = [f"{r['model']} / {r['domain']} ({r['corr']:.2f})" for r in neg.head(8).iter_rows(named=True)]
        more = f" ... ({neg.height} in all)" if neg.height > 8 else ""
        msgs.append("negative within-domain split-half correlation (evidence against exchangeable subjects in "
                    f"that domain) for {', '.join(pairs)}{more}")
    undefined = split_frame.filter(pl.col("status") != "ok")
    if undefined.height:
        msgs.append(f"split-half correlation not defined for {undefined.height} (model, domain) pair(s) "
                    f"(e.g. {undefined['model'][0]} / {undefined['domain'][0]}: {undefined['status'][0]})")
    return msgs


def _user_weights(m: BenchmarkMatrices, weights: dict[str, float]) -> tuple[np.ndarray | None, list[str]]:
    names = m.subjects["subject"].to_list()
    known = set(names)
    notes = []
    unknown = sorted(set(weights) - known)
    if unknown:
        notes.append(f"subject_weights names {len(unknown)} subject(s) not in the benchmark, ignored: "
                     f"{unknown[:8]}")
    w = np.array([weights.get(s, 0.0) for s in names], dtype=float)
    if not w.sum() > 0:
        notes.append("subject_weights gives no positive weight to any subject of the benchmark; "
                     "no weighted score reported")
        return None, notes
    return w, notes


@dataclass(frozen=True)
class _Caught:
    """A warning caught in one part of the analysis (picklable: a part may run on a Dask worker; the
    stats layer's warnings pickle with their index fields, which run_analysis names)."""

    category: type
    message: Warning


def _caught(records) -> list[_Caught]:
    return [_Caught(w.category, w.message) for w in records]


@dataclass(frozen=True)
class ModelBlock:
    """The per-model part of the analysis for the model columns of a matrix: the domain fits, the
    hierarchical bounds per metric and the comparator intervals of the Table 3 layout.

    Every number of a column depends on that column alone (each fit, bound and interval is
    computed on its own), so the parts of blocks of models, concatenated in column order, are
    the part of the whole matrix to the last bit (tests/tasks/audit/test_dask_blocks.py); the Dask audit
    computes them block by block on the workers (tasks/audit/distributed.py).
    """

    fits: DomainFits
    bounds: dict[str, HierarchicalBound]
    comparators: dict[str, dict[str, IntervalResult]]
    same: dict[str, SameSubjectsInterval]
    fit_warnings: list[_Caught]
    bound_warnings: list[_Caught]
    other_warnings: list[_Caught]


def _domains(m: BenchmarkMatrices, levels: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    if "domain" in levels:
        return np.asarray(m.subject_domain, dtype=np.int64), list(m.domains)
    return np.zeros(m.subjects.height, dtype=np.int64), [ALL_SUBJECTS]


def _metrics(m: BenchmarkMatrices, config: AuditConfig) -> tuple[dict[str, object], list[str]]:
    metrics: dict[str, object] = {"macro": "macro", "pooled": "pooled"}
    notes: list[str] = []
    if config.subject_weights:
        w, notes = _user_weights(m, config.subject_weights)
        if w is not None:
            metrics["weighted"] = w
    return metrics, notes


#: The comparator methods of the Table 3 layout (lm_eval_group is the comparator analysis' own).
TABLE3_METHODS = ("iid_clt", "wilson", "clustered_subject")


def _table3_comparators(m: BenchmarkMatrices, fits: DomainFits, alpha: float) -> dict[str, dict[str, IntervalResult]]:
    """The Table 3 comparator intervals of both scores: from the fits' per-subject counts when every
    score is 0/1 and every subject has items (the same numbers as from the matrix, without reading
    it again), else from one pass over the matrix."""
    codes = np.asarray(m.item_subject)
    if fits.binary.all() and np.bincount(codes, minlength=fits.n.shape[0]).all():
        out = comparator_intervals_counts(fits.n, fits.total, alpha=alpha)
    else:
        out = comparator_intervals_both(m.scores, codes, alpha=alpha)
    return {w: {meth: out[w][meth] for meth in TABLE3_METHODS} for w in out}


def model_block(m: BenchmarkMatrices, config: AuditConfig) -> ModelBlock:
    """Fits, bounds and comparator intervals of ``m``'s models (all of them, or a block of them)."""
    levels = tuple(config.hierarchy)
    item_only = levels == ()
    doms, _ = _domains(m, levels)
    metrics, _ = _metrics(m, config)
    # The subject proxies used are upper confidence bounds at a share of alpha (valid with few
    # subjects per domain); the plug-in fit stays in the domain_fits table for reference.
    proxy_alpha = PROXY_SHARE * config.alpha
    with warnings.catch_warnings(record=True) as caught_fits:
        warnings.simplefilter("always")
        # The per-subject counts the audit's analyses share (one pass over the matrix for all of them).
        counts = m.subject_counts
        # 0/1 scores: the counts are all the fits read (the matrix need not be held, tasks/store/blocked.py).
        scores = None if counts.binary.all() and counts.in_unit_interval else m.scores
        fits = fit_domains(scores, m.item_subject, doms, proxy_alpha=proxy_alpha, counts=counts)
    with warnings.catch_warnings(record=True) as caught_bounds:
        warnings.simplefilter("always")
        means = np.nan_to_num(fits.subject_means, nan=0.0)
        bounds = {name: hierarchical_bound(means, fits.n, doms, None if item_only else fits.s2_upper, weights=wts,
                                           alpha=config.alpha, proxy_alpha=0.0 if item_only else proxy_alpha,
                                           profile=None if item_only else fits.profile)
                  for name, wts in metrics.items()}
    with warnings.catch_warnings(record=True) as caught_other:
        warnings.simplefilter("always")
        # Recomputed only for the Table 3 layout; the comparator analysis reports their warnings.
        warnings.simplefilter("ignore", DegenerateDataWarning)
        comparators = _table3_comparators(m, fits, config.alpha)
    # The same-subjects interval of every score (the headline when the new-subjects one is too wide).
    # One pass over the matrix serves every weighting; 0/1 scores reuse the fits' counts.
    if fits.binary.all():
        sums = (fits.n, fits.total, fits.total)
    else:
        sums = subject_sums(m.scores, m.item_subject, n_subjects=m.subjects.height)
    same = {name: same_subjects_from_sums(*sums, weights=wts, alpha=config.alpha) for name, wts in metrics.items()}
    return ModelBlock(fits=fits, bounds=bounds, comparators=comparators, same=same, fit_warnings=_caught(caught_fits),
                      bound_warnings=_caught(caught_bounds), other_warnings=_caught(caught_other))


def split_part(m: BenchmarkMatrices, config: AuditConfig, fits: DomainFits | None = None
               ) -> tuple[SplitHalfResult, list[_Caught]]:
    """The split-half diagnostic of the whole matrix (one random stream for all models: not split by block);
    ``fits``: the whole matrix' domain fits, whose subject counts it then reuses."""
    doms, _ = _domains(m, tuple(config.hierarchy))
    counts = None if fits is not None else m.subject_counts  # the same numbers as the fits'
    binary = (fits if fits is not None else counts).binary.all() and m.subject_counts.in_unit_interval
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # 0/1 scores: the half counts are drawn from the counts alone (the matrix need not be held).
        split = split_half(None if binary else m.scores, m.item_subject, doms, n_splits=N_SPLITS,
                           rng=np.random.default_rng(SPLIT_SEED), fits=fits, counts=counts,
                           mc_tol=SPLIT_MC_TOL, min_splits=SPLIT_ROUND)
    return split, _caught(caught)


def _concat(cls, parts: list, model_axis: dict[str, int]):
    """One dataclass from per-block ones: the fields in ``model_axis`` concatenated along that axis
    (the model axis), every other field taken from the first block (the same in all of them)."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    fields = {}
    for f in dataclasses.fields(cls):
        v = getattr(first, f.name)
        if f.name in model_axis and v is not None:
            v = np.concatenate([getattr(p, f.name) for p in parts], axis=model_axis[f.name])
        fields[f.name] = v
    return cls(**fields)


#: Model axis of each per-model field of DomainFits, HierarchicalBound and IntervalResult.
_FIT_AXES = {**{f: 1 for f in ("a", "b", "nu", "mean", "s2", "icc", "loglik", "n_subjects", "n_items", "status",
                               "degenerate", "converged", "n", "total", "nu_lower", "s2_upper", "upper_alpha",
                               "profile")},
             "fit_method": 0, "binary": 0}
_BOUND_AXES = {f: 0 for f in ("estimate", "lower", "upper", "half_width", "sigma2_item", "sigma2_subj", "sigma2_dom",
                              "sigma2_eff", "n", "n_subjects")} | {"weights": 1}


def merge_blocks(parts: list[ModelBlock]) -> ModelBlock:
    """The blocks' parts (in column order) as the part of all their models."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]

    def interval_axes(r):
        return {f.name: 0 for f in dataclasses.fields(r) if isinstance(getattr(r, f.name), np.ndarray)}

    fits = _concat(DomainFits, [p.fits for p in parts], _FIT_AXES)
    # The fits' assumptions name the beta fit on subject means when some model is not binary.
    fits = dataclasses.replace(fits, assumptions=max((p.fits.assumptions for p in parts), key=len))
    return ModelBlock(
        fits=fits,
        bounds={k: _concat(HierarchicalBound, [p.bounds[k] for p in parts], _BOUND_AXES) for k in first.bounds},
        comparators={metric: {meth: _concat(type(r), [p.comparators[metric][meth] for p in parts], interval_axes(r))
                              for meth, r in first.comparators[metric].items()} for metric in first.comparators},
        same={k: _concat(SameSubjectsInterval, [p.same[k] for p in parts], interval_axes(first.same[k]))
              for k in first.same},
        fit_warnings=[w for p in parts for w in p.fit_warnings],
        bound_warnings=[w for p in parts for w in p.bound_warnings],
        other_warnings=[w for p in parts for w in p.other_warnings])


def analyze(m: BenchmarkMatrices, config: AuditConfig) -> AnalysisOutput:
    block = model_block(m, config)
    return assemble(m, config, [block], split_part(m, config, block.fits))


def assemble(m: BenchmarkMatrices, config: AuditConfig, blocks: list[ModelBlock],
             split: tuple[SplitHalfResult, list[_Caught]]) -> AnalysisOutput:
    """The analysis from its per-model parts (one block, or the blocks of models in column order) and
    the split-half diagnostic: what needs every model at once (the subject correlation across
    models), the tables, warnings and report sections."""
    levels = tuple(config.hierarchy)
    item_only = levels == ()
    subjects = m.subjects
    n_subj = subjects.height
    doms, dom_names = _domains(m, levels)
    models = m.models
    metrics, notes = _metrics(m, config)
    part = merge_blocks(blocks)
    fits, bounds, comparators = part.fits, part.bounds, part.comparators
    split, split_warnings = split
    for w in part.other_warnings:  # (outside the restated families: as in one process, to run_analysis)
        warnings.warn(w.message, w.category, stacklevel=2)
    with warnings.catch_warnings(record=True) as caught_corr:
        warnings.simplefilter("always")
        corr = (subject_correlation(fits.subject_means, np.asarray(m.subject_domain, dtype=np.int64))
                if len(models) >= 3 else None)
    caught = part.fit_warnings + part.bound_warnings + split_warnings + _caught(caught_corr)

    hier = _hierarchy_name(levels)
    intervals = pl.concat([pl.DataFrame({
        "model": models, "metric": name, "method": "hierarchical", "estimate": b.estimate, "lower": b.lower,
        "upper": b.upper, "half_width": b.half_width, "alpha": float(b.alpha)}, schema=INTERVAL_SCHEMA)
        for name, b in bounds.items()])
    headline = pl.concat([headline_frame(models, name, b, part.same[name], item_only=item_only)
                          for name, b in bounds.items()])
    components = pl.concat([pl.DataFrame({
        "model": models, "metric": name, "hierarchy": hier, "estimate": b.estimate, "sigma2_item": b.sigma2_item,
        "sigma2_subj": b.sigma2_subj, "sigma2_dom": b.sigma2_dom, "sigma2_eff": b.sigma2_eff,
        "half_width": b.half_width, "lower": b.lower, "upper": b.upper, "alpha": float(b.alpha),
        "n_items": b.n, "n_subjects": b.n_subjects}, schema=COMPONENT_SCHEMA) for name, b in bounds.items()])

    d, mdl = fits.s2.shape
    reasons = fits.reason
    fit_frame = pl.DataFrame({
        "model": np.tile(models, d), "domain": np.repeat(dom_names, mdl),
        "K_d": fits.n_subjects.ravel(), "n_items": fits.n_items.ravel(), "mean": fits.mean.ravel(),
        "a": fits.a.ravel(), "b": fits.b.ravel(), "nu": fits.nu.ravel(), "s2": fits.s2.ravel(),
        "icc": fits.icc.ravel(), "loglik": fits.loglik.ravel(),
        "method": np.tile(fits.fit_method, d), "status": fits.status.ravel(),
        "degenerate": fits.degenerate.ravel(), "reason": [str(r) for r in reasons.ravel()],
        "used_in_bound": np.full(d * mdl, not item_only), "nu_lower": fits.nu_lower.ravel(),
        "s2_upper": fits.s2_upper.ravel(), "upper_alpha": fits.upper_alpha.ravel()}, schema=FIT_SCHEMA)
    # A fit over no answered subject is no fit at all; keep the table to real ones.
    fit_frame = fit_frame.filter(pl.col("K_d") > 0)

    split_frame = pl.DataFrame({
        "model": np.tile(models, d), "domain": np.repeat(dom_names, mdl),
        "n_subjects": split.n_subjects.ravel(),
        "corr": [None if not ok else float(v) for v, ok in zip(split.corr.ravel(), split.defined.ravel())],
        "sd": [None if not ok else float(v) for v, ok in zip(split.sd.ravel(), split.defined.ravel())],
        "mc_se": [None if not ok else float(v) for v, ok in zip(split.mc_se.ravel(), split.defined.ravel())],
        "n_valid_splits": split.n_valid.ravel(), "n_splits": np.tile(split.splits_drawn, d),
        "negative": split.negative.ravel(),
        "status": split.status.ravel()}, schema=SPLIT_SCHEMA)

    if corr is not None:
        # one row per (i, j), i-major: names gathered by code, an undefined correlation null (40,000 rows
        # at 200 subjects: Python lists of them cost more than the correlations)
        ii = pl.Series(np.repeat(np.arange(n_subj), n_subj), dtype=pl.UInt32)
        jj = pl.Series(np.tile(np.arange(n_subj), n_subj), dtype=pl.UInt32)
        names, doms_of = subjects["subject"], subjects["domain"]
        corr_frame = pl.DataFrame({
            "subject_i": names.gather(ii), "domain_i": doms_of.gather(ii),
            "subject_j": names.gather(jj), "domain_j": doms_of.gather(jj),
            "corr": pl.Series(np.asarray(corr.corr, dtype=float).ravel()),
            "ok": pl.Series(np.asarray(corr.defined, dtype=bool).ravel()),
            "n_models": corr.n_models.ravel()}).select(
            "subject_i", "domain_i", "subject_j", "domain_j",
            pl.when(pl.col("ok")).then(pl.col("corr")).alias("corr"), "n_models").cast(CORR_SCHEMA)
    else:
        corr_frame = pl.DataFrame(schema=CORR_SCHEMA)
        notes.append(f"subject correlation heatmap needs at least 3 models; the benchmark has {len(models)}")

    if item_only:
        notes.append("hierarchy 'none': the hierarchical intervals use the item-level proxy only (items treated "
                     "as independent); they are not robust to dependence within subjects")
    run_warnings = (notes + _data_warnings(m, fits, metrics.get("weighted"), corr)
                    + _named_warnings(caught, fit_frame, split_frame))

    fitted = Fitted(hier=hier, bounds=bounds, comparators=comparators, components=components, fit_frame=fit_frame,
                     split_frame=split_frame, corr=corr, item_only=item_only)
    return AnalysisOutput(
        name="hierarchical",
        tables={"hierarchical_components": components, "domain_fits": fit_frame, "split_half": split_frame,
                "subject_correlation": corr_frame, "headline": headline},
        intervals=intervals, sections=sections(m, config, fitted), warnings=run_warnings)
