"""Prompt-perturbation audits (composite-null paper): per item x variant replicate counts, the design, the tests.

A *design* names, for one benchmark, the base variant (the prompt as written), the null
variants (rewordings the user considers semantically irrelevant) and the tested variants.  For
every model, item and tested variant v the composite-null test asks whether v's response rate
lies outside the range spanned by the null variants (null set = base + null variants, minus v
itself, as the paper removes q' from Q_0), and the classical Fisher test asks whether v differs
from the base alone.  Per tested variant the share of items where the change matters is
reported with Benjamini-Hochberg across items, beside the classical test's share.

Replicate counts come straight from the store (one SQL query with bound parameters); each
(item, variant) cell is K successes out of r replicates.  Fractional scores (in [0, 1]) get the
widened-range test on mean scores and, as the classical contrast, the energy-distance test of the
tested variant's scores against the base's.
"""

from __future__ import annotations

import warnings
import zlib
from dataclasses import dataclass

import numpy as np
import polars as pl

from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.perturbation import (LOW_POWER_GAP, TEST_METHODS, benjamini_hochberg, composite_test,
                                          low_power_sentence, no_power_sentence, widened_range_test_scores)
from benchcert.stats.perturbation.calibrated import ASSUMPTIONS as CALIBRATED_ASSUMPTIONS
from benchcert.stats.perturbation.item_test import ASSUMPTIONS as WIDENED_ASSUMPTIONS
from benchcert.stats.two_sample import energy_min_p, energy_test, fisher_contrast, fisher_min_p
from benchcert.tasks.store.matrices import BenchmarkMatrices, MatrixError, available_variants
from benchcert.tasks.errors import DataError
from benchcert.tasks.perturbation.rows import VariantRow
from benchcert.tasks.result_types import TableResult
from benchcert.tasks.store.variant_counts import read_variant_counts

COUNTS_SCHEMA = {"model": pl.String, "item_id": pl.String, "variant": pl.String, "k": pl.Int64, "r": pl.Int64,
                 "binary": pl.Boolean, "s": pl.Float64, "scores": pl.List(pl.Float64)}
# k: successes (binary scores); s: sum of scores; scores: the replicates' scores, kept only for cells with a
# score outside {0, 1} (the energy test needs them).

ITEMS_SCHEMA = {
    "model": pl.String, "item_id": pl.String, "variant": pl.String, "base": pl.String,
    "test_rate": pl.Float64, "test_replicates": pl.Int64, "base_rate": pl.Float64, "base_replicates": pl.Int64,
    "m": pl.Int64,
    "r_min": pl.Int64, "r_max": pl.Int64, "null_min": pl.Float64, "null_max": pl.Float64,
    "a_hat": pl.Float64, "b_hat": pl.Float64, "range_low": pl.Float64, "range_high": pl.Float64,
    "statistic": pl.Float64, "eps": pl.Float64,
    "eps_union": pl.Float64, "p_value": pl.Float64, "reject": pl.Boolean, "reject_bh": pl.Boolean,
    "classical_p": pl.Float64, "classical_reject": pl.Boolean, "classical_reject_bh": pl.Boolean,
    "classical_method": pl.String, "classical_status": pl.String, "classical_min_p": pl.Float64,
    "scores": pl.String, "unequal_replicates": pl.Boolean, "status": pl.String, "method": pl.String,
    "min_detectable_gap": pl.Float64, "low_power": pl.Boolean,
}

VARIANTS_SCHEMA = {
    "model": pl.String, "variant": pl.String, "base": pl.String, "n_items": pl.Int64, "n_tested": pl.Int64,
    "composite_rejections": pl.Int64, "composite_share": pl.Float64, "composite_share_bh": pl.Float64,
    "classical_tested": pl.Int64, "classical_rejections": pl.Int64, "classical_share": pl.Float64,
    "classical_share_bh": pl.Float64, "n_classical_no_power": pl.Int64, "classical_no_power": pl.String,
    "n_ok": pl.Int64, "n_identical_null_rates": pl.Int64,
    "n_one_null_variant": pl.Int64, "n_no_null_variants": pl.Int64, "n_no_valid_eps": pl.Int64,
    "n_no_alternative": pl.Int64, "n_no_power": pl.Int64, "no_power": pl.String,
    "n_low_power": pl.Int64, "low_power": pl.String,
    "n_non_binary": pl.Int64, "n_unequal_replicates": pl.Int64, "median_eps": pl.Float64,
    "test_accuracy": pl.Float64, "alpha": pl.Float64, "method": pl.String,
    "composite_status": pl.String, "classical_status": pl.String,
}

#: What a (model, variant)'s share can say, by test: "tested" (a share over the tested items), or why
#: there is no share - a share of 0 would read as "the prompt does not matter".
VARIANT_STATUSES = ("tested", "no power", "no alternative", "untested")


def variant_status_columns() -> list[pl.Expr]:
    """The one rule for each (model, variant)'s ``composite_status`` and ``classical_status``
    (:data:`VARIANT_STATUSES`), which the command line, ``--json`` and the report all read:
    tested when some item was tested; else no power when some item could not reject at any outcome;
    else (composite test) no alternative when every item's null range covers every rate; else untested."""
    return [pl.when(pl.col("n_tested") > 0).then(pl.lit("tested"))
            .when(pl.col("n_no_power") > 0).then(pl.lit("no power"))
            .when(pl.col("n_no_alternative") > 0).then(pl.lit("no alternative"))
            .otherwise(pl.lit("untested")).alias("composite_status"),
            pl.when(pl.col("classical_tested") > 0).then(pl.lit("tested"))
            .when(pl.col("n_classical_no_power") > 0).then(pl.lit("no power"))
            .otherwise(pl.lit("untested")).alias("classical_status")]

#: What each item status means (printed in reports and the CLI).
STATUS_TEXT = {
    "ok": "tested (calibrated widened-range test by default; the plug-in methods use Algorithm B's range as if it "
          "were true)",
    "no_alternative": "the null variants' range (their rates, or the range widened for their sampling and noise) "
                      "covers every rate the tested variant could show: nothing is left to detect; never rejects",
    "no_power": "no outcome at these replicate counts could reject at alpha: says nothing about whether the prompt "
                "matters; never rejects",
    "identical_null_rates": "(plug-in methods) all null variants gave the same rate: the range is a point, so "
                            "the composite null collapses to a simple one; decided by Fisher's exact test against "
                            "the pooled null variants",
    "one_null_variant": "only one null variant answered this item: no range can be estimated; not tested "
                        "(plug-in methods: Fisher's exact test against it)",
    "no_null_variants": "no null variant answered this item: not tested",
    "no_valid_eps": "(plug-in union method) no threshold keeps Theorem 2's bound at alpha with these replicate "
                    "counts: never rejects",
}


#: Random relabellings of the energy test (all splits are enumerated when there are fewer).
ENERGY_PERMUTATIONS = 999


def classical_no_power_sentence(method: str, r_test: tuple[int, int], r_base: tuple[int, int], min_p: float,
                                alpha: float) -> str:
    """The words shown when the classical test (Fisher or energy) cannot reject at alpha."""
    name = "Fisher's exact test" if method == "fisher_exact" else "the energy test"

    def reps(lo_hi):
        lo, hi = lo_hi
        return f"{lo}" if lo == hi else f"{lo} to {hi}"

    return (f"with {reps(r_test)} tested and {reps(r_base)} base replicates {name} cannot reject at alpha = "
            f"{alpha:g} (its smallest attainable p-value is {min_p:.3g}): this says nothing about whether the "
            "prompt matters")


class DesignError(DataError):
    """A perturbation design that does not fit the benchmark (unknown or overlapping variants; exit code 1)."""


@dataclass(frozen=True)
class VariantDesign:
    """Which variant is the base, which form the null set, which are tested."""

    base: str
    null: tuple[str, ...]
    test: tuple[str, ...]
    rule: str

    def null_for(self, tested: str) -> tuple[str, ...]:
        """Null set for one tested variant: base and null variants, the tested one removed."""
        out = dict.fromkeys((self.base, *self.null))
        out.pop(tested, None)
        return tuple(out)

    def as_dict(self) -> dict:
        return {"base": self.base, "null": list(self.null), "test": list(self.test), "rule": self.rule}


@dataclass(frozen=True, repr=False)
class PerturbationAudit(TableResult):
    """Result of one design on one benchmark: per-item tests, per-variant shares, notes.

    ``variants`` (:meth:`to_polars`) has a row per (model, tested variant), also as typed objects
    (:attr:`rows`); ``items`` a row per item test.

    Examples
    --------
    >>> import benchcert as bc, numpy as np, polars as pl
    >>> rng = np.random.default_rng(1)
    >>> rows = [("m", f"q{i}", v, rep, float(rng.random() < (0.9 if v == "terse" and i % 2 else 0.5)))
    ...         for i in range(30) for v in ("base", "r1", "r2", "r3", "terse") for rep in range(10)]
    >>> frame = pl.DataFrame(rows, schema=["model", "item", "variant", "replicate", "score"], orient="row")
    >>> store = bc.Store()
    >>> _ = store.ingest(frame, benchmark="styles", mapping={"item_id": "item"})
    >>> audit = store.perturb("styles", base="base", null=["r1", "r2", "r3"], test=["terse"])
    >>> type(audit).__name__, audit.rows[0].variant, audit.rows[0].composite_status
    ('PerturbationAudit', 'terse', 'tested')
    """

    design: VariantDesign
    items: pl.DataFrame
    variants: pl.DataFrame
    null_rates: pl.DataFrame
    counts: pl.DataFrame
    notes: tuple[str, ...]
    alpha: float
    method: str
    assumptions: tuple[str, ...] = ()

    def to_polars(self) -> pl.DataFrame:
        """One row per (model, tested variant): items tested, the composite and classical shares (raw
        and Benjamini-Hochberg) and what each test could say (``composite_status``, ``classical_status``)."""
        return self.variants

    def _title(self) -> str:
        return (f"prompt perturbation: base {self.design.base!r}, {len(self.design.test)} tested variant(s), "
                f"alpha {self.alpha:g}, method {self.method}")

    def _notes(self) -> list[str]:
        return [f"assumes: {a}" for a in self.assumptions] + list(self.notes[:3])

    def __repr__(self) -> str:
        shown = self.variants.select("model", "variant", "n_tested", "composite_share", "composite_status",
                                     "classical_share")
        return f"<PerturbationAudit {self._title()}>\n{shown}"

    @property
    def rows(self) -> tuple[VariantRow, ...]:
        """The (model, tested variant) rows of :meth:`to_polars` as typed, frozen objects."""
        return tuple(VariantRow.from_dict(r) for r in self.variants.iter_rows(named=True))

    def item_rates(self, model: str, item_id: str) -> dict[str, float]:
        """Response rate of every variant of one item (for plots)."""
        part = self.counts.filter((pl.col("model") == model) & (pl.col("item_id") == item_id))
        total = "s" if "s" in part.columns else "k"          # mean score for fractional scores
        return {v: k / r for v, k, r in part.select("variant", total, "r").iter_rows()}


class VariantMatrices(BenchmarkMatrices):
    """Benchmark matrices that also carry per (model, item, variant) replicate counts."""

    def __init__(self, *args, variant_counts: pl.DataFrame | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.variant_counts = variant_counts


# --------------------------------------------------------------------------------------
# reading the store


def load_variant_counts(con, benchmark: str, *, models: list[str] | None = None) -> pl.DataFrame:
    """K (sum of scores), r (replicates) and whether all scores are 0/1, per model x item x variant."""
    frame = read_variant_counts(con, benchmark)
    if frame.height == 0:
        raise MatrixError(f"benchmark {benchmark!r} has no responses in the store")
    frame = (frame.with_columns(pl.col("k").round(0).cast(pl.Int64), pl.col("s").cast(pl.Float64))
             .cast(COUNTS_SCHEMA).select(list(COUNTS_SCHEMA)))
    if models:
        frame = frame.filter(pl.col("model").is_in(models))
    return frame


def with_variant_counts(con, matrices: BenchmarkMatrices) -> BenchmarkMatrices:
    """Attach replicate counts per variant when the benchmark has at least 3 variants (else unchanged).

    The check is one DISTINCT query, so benchmarks without variants pay nothing more.
    """
    if len(available_variants(con, matrices.benchmark)) < 3:
        return matrices
    # The matrices' arrays and frames are shared, not copied.
    return VariantMatrices(matrices.benchmark, matrices.variant, items=matrices.items, models=matrices.models,
                           scores=matrices.scores, n_replicates=matrices.n_replicates,
                           variant_counts=load_variant_counts(con, matrices.benchmark))


# --------------------------------------------------------------------------------------
# designs


def default_design(variants: list[str]) -> VariantDesign | None:
    """The audit's design when the user gave none: leave-one-out over all variants.

    Base = the variant ``""`` when present, else the first variant in sorted order (benchcert's
    convention for "the prompt as written").  Every variant counts as a semantically irrelevant
    rewording of the base, and each non-base variant is tested against all the others: "does
    this prompt change matter beyond the spread of the other prompts?".  Needs 3 variants, so
    that every test has at least 2 null variants.
    """
    variants = sorted(dict.fromkeys(variants))
    if len(variants) < 3:
        return None
    base = "" if "" in variants else variants[0]
    tested = tuple(v for v in variants if v != base)
    return VariantDesign(base=base, null=tuple(variants), test=tested,
                         rule=f"leave-one-out: base {base!r} (\"\" if present, else the first variant); every other "
                              "variant tested against all remaining variants as the null set")


def make_design(variants: list[str], *, base: str | None, null: list[str] | None,
                test: list[str] | None) -> VariantDesign:
    """A user design, checked against the benchmark's variants; missing parts default as in
    :func:`default_design` (null: every variant; test: every non-base variant)."""
    present = sorted(dict.fromkeys(variants))
    if base is None:
        base = "" if "" in present else (present[0] if present else "")
    given = {"base": [base], "null": list(null or []), "test": list(test or [])}
    for part, names in given.items():
        missing = [v for v in names if v not in present]
        if missing:
            raise DesignError(f"{part} variant(s) {missing} not in the benchmark; variants: {present}")
    tested = tuple(dict.fromkeys(test)) if test else tuple(v for v in present if v != base)
    if base in tested:
        raise DesignError(f"the base variant {base!r} cannot also be tested")
    nulls = tuple(dict.fromkeys(null)) if null else tuple(present)
    if not tested:
        raise DesignError(f"no variant to test; variants: {present}")
    rule = "user design" if (null or test) else "user base; every other variant tested against the rest"
    return VariantDesign(base=base, null=nulls, test=tested, rule=rule)


# --------------------------------------------------------------------------------------
# running a design


def _cells(counts: pl.DataFrame) -> dict[tuple[str, str], dict[str, tuple]]:
    """(k, r, binary, sum of scores, scores or None) per model, item and variant."""
    if "s" not in counts.columns:           # frames built by hand: binary counts only
        counts = counts.with_columns(pl.col("k").cast(pl.Float64).alias("s"),
                                     pl.lit(None, pl.List(pl.Float64)).alias("scores"))
    out: dict[tuple[str, str], dict[str, tuple]] = {}
    for model, item, variant, k, r, binary, ssum, scores in counts.select(list(COUNTS_SCHEMA)).iter_rows():
        out.setdefault((model, item), {})[variant] = (int(k), int(r), bool(binary), float(ssum), scores)
    return out


def _scores(k: int, r: int, scores) -> np.ndarray:
    """A cell's replicate scores (a binary cell stores only its count: k ones and r - k zeros)."""
    return np.asarray(scores, dtype=float) if scores is not None else np.r_[np.ones(k), np.zeros(r - k)]


def _energy_rng(model: str, item: str, variant: str) -> np.random.Generator:
    # One stream per item and variant: results do not depend on the order items are visited.
    return np.random.default_rng(zlib.crc32(f"{model}\x00{item}\x00{variant}".encode()))


def _item_row(model, item, tested, base, cells, nulls, alpha, method, cache):
    kt, rt, bt, st, scores_t = cells[tested]
    row = {"model": model, "item_id": item, "variant": tested, "base": base, "test_rate": kt / rt,
           "test_replicates": rt, "base_rate": None, "base_replicates": None, "m": 0, "r_min": None, "r_max": None, "null_min": None,
           "null_max": None, "a_hat": None, "b_hat": None, "range_low": None, "range_high": None,
           "statistic": None, "eps": None, "eps_union": None,
           "p_value": None, "reject": None, "classical_p": None, "classical_reject": None,
           "unequal_replicates": False, "status": "", "method": None, "classical_method": None,
           "classical_status": None, "classical_min_p": None, "scores": "binary", "min_detectable_gap": None,
           "low_power": None}
    present = [v for v in nulls if v in cells]
    row["m"] = len(present)
    binary = bt and all(cells[v][2] for v in present) and (base not in cells or cells[base][2])
    if not binary:
        row["scores"] = "fractional"
        row["test_rate"] = st / rt
    if base in cells and base != tested:
        kb, rb, _, sb, scores_b = cells[base]
        row["base_rate"] = kb / rb if binary else sb / rb
        row["base_replicates"] = rb
        # Before testing: the smallest p-value any outcome could give at these replicate counts. Above
        # alpha the test cannot reject, and "not significant" would read as "the prompt does not matter":
        # the item is no_power and untested (no p-value, out of Benjamini-Hochberg). A tested item can
        # reach p <= alpha, so BH across the tested items can always reject too (all at p_min, k = n).
        if binary:
            row["classical_method"] = "fisher_exact"
            row["classical_min_p"] = fisher_min_p(rt, rb)
        elif rt >= 2 and rb >= 2:
            # Fractional scores: the energy test of the tested variant's score distribution against the
            # base's (simple null, exact permutation p-value), the classical contrast for such scores.
            row["classical_method"] = "energy_distance"
            row["classical_min_p"] = energy_min_p(rt, rb, ENERGY_PERMUTATIONS)
        if row["classical_min_p"] is not None and row["classical_min_p"] > alpha:
            row["classical_status"] = "no_power"
        elif binary:
            f = fisher_contrast(kt, rt, kb, rb, alpha=alpha)
            row["classical_status"] = "ok"
            row["classical_p"], row["classical_reject"] = float(f.p_value), bool(f.reject)
        elif row["classical_method"] is not None:
            xt, xb = _scores(kt, rt, scores_t), _scores(kb, rb, scores_b)
            e = energy_test(xt, xb, n_permutations=ENERGY_PERMUTATIONS, alpha=alpha,
                            rng=_energy_rng(model, item, tested))
            row["classical_status"] = "ok"
            row["classical_p"], row["classical_reject"] = float(e.p_value), bool(e.reject)
    if not present:
        row["status"] = "no_null_variants"
        return row
    # The test is symmetric in the null variants, and deterministic decoding repeats the same
    # counts on many items: one computation per distinct configuration.
    if binary:
        key = (tuple(sorted(cells[v][:2] for v in present)), kt, rt, alpha, method)
    else:
        key = (tuple(sorted((cells[v][3], cells[v][1]) for v in present)), st, rt, alpha, "scores")
    res = cache.get(key)
    if res is None:
        k = np.array([c[0] for c in key[0]])
        r = np.array([c[1] for c in key[0]])
        if binary:
            res = composite_test(k, r, kt, rt, alpha=alpha, method=method)
        else:
            # Fractional scores: the widened-range test on mean scores (Hoeffding holds for any score in
            # [0, 1]); the plug-in calibrations need binary responses.
            res = widened_range_test_scores(k, r, st, rt, alpha=alpha)
        cache[key] = res
    # An untested item (no power, no alternative, one null variant) has no p-value: null, not NaN,
    # so that it counts neither as tested nor in Benjamini-Hochberg.
    p = None if res.p_value is None or np.isnan(res.p_value) else float(res.p_value)
    row.update(r_min=res.r_min, r_max=res.r_max, null_min=res.null_min, null_max=res.null_max, a_hat=res.a_hat,
               b_hat=res.b_hat, range_low=res.range_low, range_high=res.range_high, statistic=res.statistic,
               eps=res.eps, eps_union=res.eps_union, p_value=p, reject=res.reject,
               unequal_replicates=res.r_min != res.r_max, status=res.status, method=res.method)
    gap = getattr(res, "min_detectable_gap", None)
    if gap is not None and res.status == "ok":
        row["min_detectable_gap"] = gap
        row["low_power"] = bool(gap > LOW_POWER_GAP)
    return row


def run_design(counts: pl.DataFrame, design: VariantDesign, *, alpha: float = 0.05,
               method: str = "calibrated") -> PerturbationAudit:
    """Run the composite and classical tests for every model, item and tested variant.

    Parameters
    ----------
    counts : polars.DataFrame
        :data:`COUNTS_SCHEMA` rows (from :func:`load_variant_counts`).
    design : VariantDesign
    alpha : float
        Level of every per-item test and FDR level of Benjamini-Hochberg across items.
    method : {"calibrated", "widened", "plugin_exact", "plugin_union"}
        The composite test (see :func:`benchcert.stats.perturbation.composite_test`): the
        calibrated widened-range test (default), the assumption-light widened test (Hoeffding
        margins) or the assumption-dependent plug-in calibrations.
    """
    if method not in TEST_METHODS:
        raise ValueError(f"method must be one of {', '.join(TEST_METHODS)}; got {method!r}")
    from benchcert.tasks.perturbation.tables import design_tables

    cells = _cells(counts)
    rows = []
    cache: dict = {}
    with warnings.catch_warnings(), design_tables():
        # Degenerate null sets are common (deterministic decoding gives identical rates); each is
        # reported in the item's status and counted in the notes instead of warned one by one.
        warnings.simplefilter("ignore", DegenerateDataWarning)
        for (model, item), item_cells in sorted(cells.items()):
            for tested in design.test:
                if tested in item_cells:
                    rows.append(_item_row(model, item, tested, design.base, item_cells, design.null_for(tested),
                                          alpha, method, cache))
    items = pl.DataFrame(rows, schema={k: v for k, v in ITEMS_SCHEMA.items() if k not in ("reject_bh",
                                                                                        "classical_reject_bh")})
    items = _with_bh(items, alpha).select(list(ITEMS_SCHEMA))
    variants = _variant_summary(items, counts, design, alpha, method)
    null_rates = _benchmark_rates(counts, design)
    notes = _notes(items, design, method, alpha)
    return PerturbationAudit(design=design, items=items, variants=variants, null_rates=null_rates,
                             counts=counts, notes=tuple(notes), alpha=alpha, method=method,
                             assumptions=assumptions_for(method))


def assumptions_for(method: str) -> tuple[str, ...]:
    """What the chosen composite test still assumes (printed with every result table)."""
    if method == "calibrated":
        return CALIBRATED_ASSUMPTIONS
    if method == "widened":
        return WIDENED_ASSUMPTIONS
    return WIDENED_ASSUMPTIONS[:2] + (
        "ASSUMPTION-DEPENDENT: the plug-in methods treat Algorithm B's range estimate as the true null range; "
        "they do not hold their level with few null variants (use the default calibrated test)",)


def _with_bh(items: pl.DataFrame, alpha: float) -> pl.DataFrame:
    if items.height == 0:
        return items.with_columns(pl.lit(None, pl.Boolean).alias("reject_bh"),
                                  pl.lit(None, pl.Boolean).alias("classical_reject_bh"))
    parts = []
    for _, part in items.group_by(["model", "variant"], maintain_order=True):
        p = part["p_value"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        c = part["classical_p"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        bh, bhc = benjamini_hochberg(p, alpha=alpha), benjamini_hochberg(c, alpha=alpha)
        parts.append(part.with_columns(
            pl.Series("reject_bh", [None if np.isnan(x) else bool(y) for x, y in zip(p, bh.reject)],
                      dtype=pl.Boolean),
            pl.Series("classical_reject_bh", [None if np.isnan(x) else bool(y) for x, y in zip(c, bhc.reject)],
                      dtype=pl.Boolean)))
    return pl.concat(parts)


def _variant_summary(items, counts, design, alpha, method) -> pl.DataFrame:
    acc = (counts.group_by("model", "variant")
           .agg((pl.col("s" if "s" in counts.columns else "k").sum() / pl.col("r").sum()).alias("test_accuracy")))
    if items.height == 0:
        return pl.DataFrame(schema=VARIANTS_SCHEMA)

    def n_status(s):
        return (pl.col("status") == s).sum().cast(pl.Int64).alias(f"n_{s}")

    out = (items.group_by("model", "variant", maintain_order=True).agg(
        pl.col("base").first(),
        pl.len().cast(pl.Int64).alias("n_items"),
        pl.col("p_value").is_not_null().sum().cast(pl.Int64).alias("n_tested"),
        pl.col("reject").fill_null(False).sum().cast(pl.Int64).alias("composite_rejections"),
        pl.col("reject_bh").fill_null(False).sum().cast(pl.Int64).alias("_bh"),
        pl.col("classical_p").is_not_null().sum().cast(pl.Int64).alias("classical_tested"),
        pl.col("classical_reject").fill_null(False).sum().cast(pl.Int64).alias("classical_rejections"),
        pl.col("classical_reject_bh").fill_null(False).sum().cast(pl.Int64).alias("_cbh"),
        n_status("ok"), n_status("identical_null_rates"), n_status("one_null_variant"),
        n_status("no_null_variants"), n_status("no_valid_eps"), n_status("no_alternative"), n_status("no_power"),
        (pl.col("classical_status") == "no_power").sum().cast(pl.Int64).alias("n_classical_no_power"),
        pl.col("low_power").fill_null(False).sum().cast(pl.Int64).alias("n_low_power"),
        pl.when(pl.col("low_power").fill_null(False)).then(pl.col("m")).min().alias("_lp_mlo"),
        pl.when(pl.col("low_power").fill_null(False)).then(pl.col("m")).max().alias("_lp_mhi"),
        pl.when(pl.col("low_power").fill_null(False)).then(pl.col("min_detectable_gap")).median().alias("_lp_gap"),
        pl.when(pl.col("status") == "no_power").then(pl.col("r_min")).min().alias("_np_lo"),
        pl.when(pl.col("status") == "no_power").then(pl.col("r_max")).max().alias("_np_hi"),
        pl.when(pl.col("status") == "no_power").then(pl.col("m")).min().alias("_np_mlo"),
        pl.when(pl.col("status") == "no_power").then(pl.col("m")).max().alias("_np_mhi"),
        (pl.col("scores") == "fractional").sum().cast(pl.Int64).alias("n_non_binary"),
        pl.col("unequal_replicates").sum().cast(pl.Int64).alias("n_unequal_replicates"),
        pl.col("eps").median().alias("median_eps"),
    ).with_columns(
        _share("composite_rejections", "n_tested").alias("composite_share"),
        _share("_bh", "n_tested").alias("composite_share_bh"),
        _share("classical_rejections", "classical_tested").alias("classical_share"),
        _share("_cbh", "classical_tested").alias("classical_share_bh"),
        pl.lit(alpha).alias("alpha"), pl.lit(method).alias("method"),
    ).join(acc, on=["model", "variant"], how="left"))
    out = out.with_columns(pl.Series("no_power", [
        None if not n else no_power_sentence(int(lo), int(hi), alpha, int(mlo), int(mhi))
        for n, lo, hi, mlo, mhi in zip(out["n_no_power"], out["_np_lo"], out["_np_hi"], out["_np_mlo"],
                                       out["_np_mhi"])], dtype=pl.String))
    out = out.with_columns(pl.Series("classical_no_power", _classical_no_power(items, out, alpha),
                                     dtype=pl.String))
    out = out.with_columns(pl.Series("low_power", [
        None if not n else low_power_sentence(int(lo), int(hi), float(g), alpha)
        for n, lo, hi, g in zip(out["n_low_power"], out["_lp_mlo"], out["_lp_mhi"], out["_lp_gap"])],
        dtype=pl.String))
    out = out.with_columns(variant_status_columns())
    order = {v: i for i, v in enumerate(design.test)}
    return (out.with_columns(pl.col("variant").replace_strict(order, default=len(order)).alias("_o"))
            .sort("model", "_o").select(list(VARIANTS_SCHEMA)).cast(VARIANTS_SCHEMA))


def _classical_no_power(items: pl.DataFrame, variants: pl.DataFrame, alpha: float) -> list[str | None]:
    """Per (model, variant) row of ``variants``: the classical no-power sentence, or None."""
    part = items.filter(pl.col("classical_status") == "no_power")
    out = []
    for model, variant, n in variants.select("model", "variant", "n_classical_no_power").iter_rows():
        if not n:
            out.append(None)
            continue
        g = part.filter((pl.col("model") == model) & (pl.col("variant") == variant))
        texts = []
        for (method,), h in g.group_by(["classical_method"], maintain_order=True):
            texts.append(classical_no_power_sentence(
                method, (int(h["test_replicates"].min()), int(h["test_replicates"].max())),
                (int(h["base_replicates"].min()), int(h["base_replicates"].max())),
                float(h["classical_min_p"].min()), alpha))
        out.append("; ".join(texts))
    return out


def _share(num: str, den: str) -> pl.Expr:
    return pl.when(pl.col(den) > 0).then(pl.col(num) / pl.col(den)).otherwise(None)


def _benchmark_rates(counts: pl.DataFrame, design: VariantDesign) -> pl.DataFrame:
    """Benchmark-level accuracy per model and variant, with its role in the design (for plots)."""
    roles = {v: "null" for v in design.null}
    roles.update({v: "tested" for v in design.test if v not in roles})
    roles[design.base] = "base"
    return (counts.filter(pl.col("variant").is_in(list(roles)))
            .group_by("model", "variant").agg((pl.col("s" if "s" in counts.columns else "k").sum()
                                               / pl.col("r").sum()).alias("accuracy"),
                                              pl.col("r").sum().alias("responses"))
            .with_columns(pl.col("variant").replace_strict(roles, default="other").alias("role"),
                          pl.col("variant").is_in(list(design.test)).alias("tested"))
            .sort("model", "variant"))


def _notes(items: pl.DataFrame, design: VariantDesign, method: str, alpha: float) -> list[str]:
    notes = [f"design: {design.rule}"]
    if items.height == 0:
        return notes + ["no item had a tested variant"]
    counts = items["status"].value_counts()
    for status, n in counts.iter_rows():
        if status == "no_power":
            part = items.filter(pl.col("status") == "no_power")
            notes.append(f"{n} item x variant test(s) no_power: "
                         + no_power_sentence(int(part["r_min"].min()), int(part["r_max"].max()), alpha,
                                             int(part["m"].min()), int(part["m"].max())))
        elif status != "ok":
            notes.append(f"{n} item x variant test(s) {status}: {STATUS_TEXT.get(status, status)}")
    low = items.filter(pl.col("low_power").fill_null(False))
    if low.height:
        notes.append(f"{low.height} of {int((items['status'] == 'ok').sum())} tested item x variant test(s) "
                     + low_power_sentence(int(low["m"].min()), int(low["m"].max()),
                                          float(low["min_detectable_gap"].median()), alpha)
                     + f" (low power: the smallest detectable change exceeds {LOW_POWER_GAP:g})")
    n_classical = int((items["classical_status"] == "no_power").sum())
    if n_classical:
        part = items.filter(pl.col("classical_status") == "no_power")
        for (cm,), h in part.group_by(["classical_method"], maintain_order=True):
            notes.append(f"{h.height} item x variant classical test(s) no_power: " + classical_no_power_sentence(
                cm, (int(h["test_replicates"].min()), int(h["test_replicates"].max())),
                (int(h["base_replicates"].min()), int(h["base_replicates"].max())), float(h["classical_min_p"].min()),
                alpha))
    unequal = int(items["unequal_replicates"].sum())
    if unequal:
        notes.append(f"{unequal} item x variant test(s) have unequal replicate counts across variants: "
                     + {"widened": "the widened-range test uses each variant's own count",
                        "calibrated": "where the null variants' counts differ, the assumption-light widened test "
                                      "decides (each variant's own count)",
                        "plugin_exact": "the exact calibration uses each variant's own count"}.get(
                            method, "the union bound uses the smallest count (conservative)"))
    return notes


def audit_benchmark(con, benchmark: str, *, base: str | None = None, null: list[str] | None = None,
                    test: list[str] | None = None, alpha: float = 0.05, method: str = "calibrated",
                    models: list[str] | None = None) -> PerturbationAudit:
    """Load a benchmark's counts and run a design (the default design when none is given)."""
    counts = load_variant_counts(con, benchmark, models=models)
    if counts.height == 0:
        raise MatrixError(f"benchmark {benchmark!r} has no responses for model(s) {models}")
    variants = counts["variant"].unique().sort().to_list()
    if base is None and null is None and test is None:
        design = default_design(variants)
        if design is None:
            raise DesignError(f"benchmark {benchmark!r} has {len(variants)} variant(s) {variants}; the default "
                              "perturbation design needs at least 3 (a base, a tested variant and two null "
                              "variants for it); give --base/--null/--test")
    else:
        design = make_design(variants, base=base, null=null, test=test)
    return run_design(counts, design, alpha=alpha, method=method)


def audit_stored(db, benchmark: str, *, base: str | None = None, null: list[str] | None = None,
                 test: list[str] | None = None, alpha: float = 0.05, method: str = "calibrated",
                 models: list[str] | None = None, lock_timeout: float | None = None) -> PerturbationAudit:
    """:func:`audit_benchmark` on the store ``db`` (``benchcert perturb``).

    The base follows the rule every command uses for its variant (``--base``, else the
    benchmark's stored default, else the only one, else ''; tasks/store/matrices.py
    ``choose_variant``); when that rule lands on the variant the built-in design would pick itself,
    the built-in design (and its checks) is used.
    """
    from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT, open_store
    from benchcert.tasks.store.matrices import choose_variant

    timeout = DEFAULT_LOCK_TIMEOUT if lock_timeout is None else lock_timeout
    with open_store(db, write=False, lock_timeout=timeout) as con:
        chosen = choose_variant(con, benchmark, base, flag="--base")
        present = available_variants(con, benchmark)
        if base is None and chosen == ("" if "" in present else present[0]):
            chosen = None  # the built-in design picks this base itself
        return audit_benchmark(con, benchmark, base=chosen, null=null, test=test, alpha=alpha, method=method,
                               models=models)
