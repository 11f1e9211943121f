"""Are a model's probabilities right?  Calibration summaries and the black-box goodness-of-fit test.

Reads the option probabilities kept in the store (table ``option_probs``: one probability per
answer option and the index of the correct option, from lm-evaluation-harness multiple-choice
log-likelihoods, inspect_ai logprobs or mapped CSV/JSONL/Parquet columns) and, per model:

* Brier score, log loss (CLT intervals), top-label ECE and reliability bins
  (:mod:`benchcert.stats.calibration`);
* the goodness-of-fit test of the black-box classifier GoF paper
  (:func:`benchcert.stats.gof.gof_test`): can a distinguisher tell the observed correct options
  from options drawn from the model's own probabilities?  Its features are the item's subject
  and domain (one-hot) and the model's probability vector.

Items are the hold-out sample: one row per item (replicate 0, or the lowest replicate
logged), items whose correct option is unknown are left out and counted.  Items with fewer
options than others get probability 0 on the missing ones (so they are never drawn).

The audit analysis (``calibration``) runs when the benchmark has probabilities; it writes the
tables ``calibration`` (one row per model) and ``calibration_bins`` (reliability-diagram
data) and a report section with the diagrams.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from benchcert.stats.calibration import calibration_summary
from benchcert.stats.gof import CROSSFIT_LEVEL_NOTE, PROB_TOLERANCE, GofSampleSizeError, gof_test
from benchcert.tasks.audit.contract import AnalysisOutput, AuditConfig
from benchcert.tasks.store.matrices import BenchmarkMatrices
from benchcert.tasks.store.option_probs import load_option_probs
from benchcert.tasks.render.sections import gof as gof_sections

#: Seed of the audit's goodness-of-fit draws: the same store gives the same report.
AUDIT_SEED = 20240617

CALIBRATION_SCHEMA = {
    "model": pl.String, "n_items": pl.Int64, "n_unlabelled": pl.Int64, "n_options": pl.Int64,
    "accuracy": pl.Float64, "mean_confidence": pl.Float64,
    "brier": pl.Float64, "brier_lower": pl.Float64, "brier_upper": pl.Float64,
    "log_loss": pl.Float64, "log_loss_lower": pl.Float64, "log_loss_upper": pl.Float64,
    "ece": pl.Float64, "ece_null": pl.Float64, "n_bins": pl.Int64,
    "gof_method": pl.String, "gof_distinguisher": pl.String, "gof_n_eval": pl.Int64,
    "gof_statistic": pl.Float64, "gof_sigma": pl.Float64, "gof_delta_min": pl.Float64, "gof_delta": pl.Float64,
    "gof_reject": pl.Boolean, "gof_p_value": pl.Float64, "gof_critical_value": pl.Float64, "alpha": pl.Float64,
    "note": pl.String,
}


def model_arrays(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Features, labels and the (n, M) probability matrix of one model's labelled rows.

    Features: one-hot subject and domain codes plus the probability vector (padded with 0
    to the largest number of options).  Returns also the number of unlabelled rows left out.
    """
    unlabelled = int(frame["label"].null_count())
    rows = frame.filter(pl.col("label").is_not_null())
    n = rows.height
    if n == 0:
        return np.zeros((0, 1)), np.zeros(0, np.int64), np.zeros((0, 2)), unlabelled
    lists = rows["probs"].to_list()
    m = max(2, max(len(p) for p in lists))
    probs = np.zeros((n, m))
    for i, p in enumerate(lists):
        probs[i, :len(p)] = p
    labels = rows["label"].to_numpy().astype(np.int64)
    blocks = [probs]
    for col in ("subject", "domain"):
        codes = (rows[col].rank("dense") - 1).cast(pl.Int64).to_numpy()
        k = int(codes.max()) + 1
        if k > 1:
            blocks.append(np.eye(k)[codes])
    return np.hstack(blocks), labels, probs, unlabelled


def _bad_row(probs: np.ndarray, labels: np.ndarray) -> str | None:
    """Why the stored probabilities cannot be tested (ingest validates them; old stores may not have)."""
    if (labels >= probs.shape[1]).any() or (labels < 0).any():
        return "a correct-option index is outside the options logged"
    if not np.isfinite(probs).all() or (probs < 0).any() or (np.abs(probs.sum(1) - 1) > PROB_TOLERANCE).any():
        return "stored probabilities are not a probability vector on every item"
    return None


def evaluate_model(frame: pl.DataFrame, *, alpha: float = 0.05, method: str = "split", folds: int = 5,
                   distinguisher: str = "logistic", delta: float = 0.0, seed: int = AUDIT_SEED,
                   n_bins: int = 15, null_draws: int = 0,
                   crossfit_variance: str = "adjusted") -> tuple[dict, dict | None]:
    """Calibration summaries and the GoF test of one model's rows; (row, reliability bins or None).

    ``crossfit_variance`` is :func:`benchcert.stats.gof.gof_test`'s (cross-fitting only); the
    row's ``gof_variance`` names the variance used ("(13)", "2 x (14)" or "(14)").

    A model with too few labelled items for the test gets its calibration numbers and a
    ``note`` saying why there is no test result (never a number from a test that cannot hold).
    """
    x, y, p, unlabelled = model_arrays(frame)
    row: dict = {"n_items": int(len(y)), "n_unlabelled": unlabelled, "n_options": int(p.shape[1]),
                 "alpha": alpha, "n_bins": n_bins, "gof_method": method, "gof_distinguisher": distinguisher,
                 "gof_delta": delta}
    notes = []
    if unlabelled:
        notes.append(f"{unlabelled} item(s) without a known correct option left out")
    problem = _bad_row(p, y) if len(y) else "no item with a known correct option"
    if problem is None and len(y) < 2:
        problem = "fewer than 2 labelled items"
    if problem:
        row["note"] = "; ".join(notes + [problem])
        return row, None
    rng = np.random.default_rng(seed)
    cal = calibration_summary(y, p, n_bins=n_bins, alpha=alpha, rng=rng)
    row.update(accuracy=cal.accuracy, mean_confidence=cal.mean_confidence,
               brier=cal.brier.estimate, brier_lower=cal.brier.lower, brier_upper=cal.brier.upper,
               log_loss=cal.log_loss.estimate, log_loss_lower=cal.log_loss.lower,
               log_loss_upper=cal.log_loss.upper, ece=cal.ece, ece_null=cal.ece_null)
    try:
        g = gof_test(x, y, p, method=method, folds=folds, distinguisher=distinguisher, delta=delta, alpha=alpha,
                     rng=rng, null_draws=null_draws, crossfit_variance=crossfit_variance)
        row.update(gof_n_eval=g.n_eval, gof_statistic=g.statistic, gof_sigma=g.sigma, gof_delta_min=g.delta_min,
                   gof_reject=g.reject, gof_p_value=g.p_value, gof_variance=g.variance)
        row["gof_critical_value"] = g.critical_value
        if method == "crossfit" and not null_draws:
            if crossfit_variance == "paper":
                notes.append("cross-fit with the paper's variance (14) " + CROSSFIT_LEVEL_NOTE)
            else:
                notes.append("cross-fit with variance 2 x (14): the paper's (14) alone rejects 0.09-0.13 of correct "
                             "models at alpha 0.05 because the fold statistics are correlated (see docs/analyses.md)")
    except GofSampleSizeError as exc:
        notes.append(f"no goodness-of-fit test: {exc}")
    row["note"] = "; ".join(notes) or None
    rel = cal.reliability
    bins = {"bin_lower": rel.bin_lower, "bin_upper": rel.bin_upper, "count": rel.count,
            "confidence": rel.confidence, "accuracy": rel.accuracy, "accuracy_lower": rel.accuracy_lower,
            "accuracy_upper": rel.accuracy_upper}
    return row, bins


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def analyze(m: BenchmarkMatrices, config: AuditConfig, *, frame: pl.DataFrame | None = None) -> AnalysisOutput:
    """The audit's calibration analysis: nothing (no table, no section) when the benchmark has no probabilities."""
    notes: list[str] = []
    if frame is None:
        frame = m.store_inputs.get("option_probs")  # read with the matrices (tasks/audit/steps.py store_inputs)
    if frame is None:
        if not config.db:
            return AnalysisOutput(name="calibration")
        from benchcert.tasks.store.connection import open_store

        try:
            with open_store(config.db, write=False, lock_timeout=60.0) as con:
                frame, _ = load_option_probs(con, m.benchmark, variant=m.variant, models=m.models)
        except Exception as exc:  # a locked or unreadable store must not fail the audit
            return AnalysisOutput(name="calibration", warnings=[
                f"calibration: option probabilities could not be read ({type(exc).__name__}: {exc})"])
    if frame.height == 0:
        return AnalysisOutput(name="calibration")
    rows, bin_frames, panels = [], [], []
    for model in sorted(set(frame["model"].to_list())):
        row, bins = evaluate_model(frame.filter(pl.col("model") == model), alpha=config.alpha)
        rows.append({"model": model, **{k: _clean(v) for k, v in row.items()}})
        if row.get("note"):
            notes.append(f"calibration: model {model!r}: {row['note']}")
        if bins is not None:
            bin_frames.append(pl.DataFrame({"model": model, **bins}).cast({"count": pl.Int64}))
            panels.append({"name": model, "confidence": bins["confidence"], "accuracy": bins["accuracy"],
                           "lower": bins["accuracy_lower"], "upper": bins["accuracy_upper"],
                           "count": bins["count"]})
    table = pl.DataFrame(rows, schema=CALIBRATION_SCHEMA)
    tables = {"calibration": table}
    if bin_frames:
        tables["calibration_bins"] = pl.concat(bin_frames)
    shown = table.select(
        "model", "n_items", (pl.col("accuracy") * 100).alias("accuracy %"),
        (pl.col("mean_confidence") * 100).alias("confidence %"), "brier", "log_loss",
        (pl.col("ece") * 100).alias("ECE %"), (pl.col("ece_null") * 100).alias("ECE if calibrated %"),
        "gof_statistic", "gof_delta_min", "gof_reject")
    return AnalysisOutput(name="calibration", tables=tables,
                          sections=[gof_sections.section(shown, panels, notes, config.alpha)],
                          warnings=notes)
