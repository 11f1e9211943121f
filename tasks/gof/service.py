"""``benchcert gof``'s service: are a model's option probabilities right?

The one home of the command's rules: which options it accepts, what the store must hold
(a known benchmark, option probabilities, every model asked for) and what each model's row
reports.  The statistics are tasks/gof/analysis.py's ``evaluate_model`` (the black-box
goodness-of-fit test and the calibration summaries); the command line only renders the
frozen :class:`GofResult`.

A problem that is the user's is raised as :class:`~benchcert.tasks.errors.UsageError`
(contradicting or out-of-range options), :class:`NoOptionProbabilities` (the store holds
nothing to test) or :class:`~benchcert.tasks.errors.MissingStoreError` (no such store); a
locked or unusable store is the store's :class:`~benchcert.tasks.store.connection.StoreError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT
from benchcert.tasks.errors import NoDataError, UsageError, unit_interval_option

#: Why a run where no item has a known correct option gives no result.
NO_LABELS = "no item has a known correct option; the test needs the label of every item it uses"


class NoOptionProbabilities(NoDataError):
    """The store holds no option probabilities to test for the benchmark, variant or models asked."""


@dataclass(frozen=True)
class GofOptions:
    """What ``benchcert gof`` was asked (the command line's options, checked by :func:`check_options`)."""

    benchmark: str
    models: tuple[str, ...] = ()
    variant: str | None = None
    method: str = "split"
    folds: int = 5
    crossfit_variance: str | None = None
    distinguisher: str = "logistic"
    delta: float = 0.0
    alpha: float = 0.05
    null_draws: int = 0
    seed: int = 0
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT


@dataclass(frozen=True)
class GofResult:
    """Per model, the goodness-of-fit test and calibration summaries (finite numbers or None).

    ``error`` is set (and the command fails) when no model has an item with a known correct
    option; ``models`` still lists what was found.
    """

    options: GofOptions
    variant: str | None
    models: tuple[dict, ...]
    error: str | None = None

    def to_dict(self) -> dict:
        """The ``--json`` body: the error and the rows, or the seed and the rows."""
        head = {"benchmark": self.options.benchmark, "variant": self.variant}
        if self.error is not None:
            return {**head, "error": self.error, "models": list(self.models)}
        return {**head, "seed": self.options.seed, "models": list(self.models)}


def check_options(opts: GofOptions) -> None:
    """:class:`UsageError` for an option out of range or one that does not apply."""
    unit_interval_option("--alpha", opts.alpha)
    if not 0 <= opts.delta < 0.5:
        raise UsageError(f"--delta must be in [0, 0.5); got {opts.delta}")
    # The calibrated cut-off is an order statistic of B + 1 values: below 1/alpha - 1 draws none has level alpha.
    fewest = math.ceil(1 / opts.alpha - 1)
    if opts.null_draws and opts.null_draws < fewest:
        raise UsageError(f"--null-draws must be 0 or at least {fewest} at alpha {opts.alpha:g}; "
                         f"got {opts.null_draws}")
    if opts.null_draws < 0:
        raise UsageError(f"--null-draws must be >= 0; got {opts.null_draws}")
    if opts.crossfit_variance is not None and opts.method != "crossfit":
        raise UsageError(f"--crossfit-variance applies to --method crossfit only; got --method {opts.method}")
    if opts.folds < 2:
        raise UsageError(f"--folds must be at least 2; got {opts.folds}")


def _finite(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _row(model: str, row: dict, opts: GofOptions) -> dict:
    """One model's reported row from ``evaluate_model``'s table row (non-finite numbers as None)."""
    out = {
        "model": model, "n": row["n_items"], "n_unlabelled": row["n_unlabelled"], "n_options": row["n_options"],
        "method": opts.method, "folds": opts.folds if opts.method == "crossfit" else None,
        "variance": row.get("gof_variance"),
        "distinguisher": opts.distinguisher, "alpha": opts.alpha, "delta": opts.delta,
        "n_eval": row.get("gof_n_eval"), "statistic": row.get("gof_statistic"), "sigma": row.get("gof_sigma"),
        "delta_min": row.get("gof_delta_min"), "reject": row.get("gof_reject"),
        "p_value": row.get("gof_p_value"), "critical_value": row.get("gof_critical_value"),
        "null_draws": opts.null_draws, "accuracy": row.get("accuracy"), "brier": row.get("brier"),
        "brier_interval": [row.get("brier_lower"), row.get("brier_upper")] if "brier" in row else None,
        "log_loss": row.get("log_loss"),
        "log_loss_interval": [row.get("log_loss_lower"), row.get("log_loss_upper")] if "log_loss" in row else None,
        "ece": row.get("ece"), "ece_if_calibrated": row.get("ece_null"), "ece_bins": row.get("n_bins"),
        "note": row.get("note")}
    return {k: (_finite(v) if not isinstance(v, list) else [_finite(x) for x in v]) for k, v in out.items()}


def run_gof(db, opts: GofOptions) -> GofResult:
    """Check ``opts``, read the benchmark's option probabilities from ``db`` and test every model.

    Raises :class:`UsageError`, :class:`NoOptionProbabilities`,
    :class:`~benchcert.tasks.errors.MissingStoreError` or
    :class:`~benchcert.tasks.store.connection.StoreError` (see the module docstring).
    """
    import polars as pl

    from benchcert.tasks.gof.analysis import evaluate_model
    from benchcert.tasks.store.connection import open_store, require_store
    from benchcert.tasks.store.option_probs import load_option_probs
    from benchcert.tasks.store.matrices import stored_benchmarks

    check_options(opts)
    require_store(db)
    with open_store(db, write=False, lock_timeout=opts.lock_timeout) as con:
        known = stored_benchmarks(con)
        frame, variant = load_option_probs(con, opts.benchmark, variant=opts.variant,
                                           models=list(opts.models) or None)
    if opts.benchmark not in known:
        raise NoOptionProbabilities(f"unknown benchmark {opts.benchmark!r} (the store has: "
                                    f"{', '.join(sorted(known)) or 'none'})")
    if frame.height == 0:
        what = f" for model(s) {', '.join(opts.models)}" if opts.models else ""
        raise NoOptionProbabilities(
            f"benchmark {opts.benchmark!r} has no option probabilities{what}"
            + (f" in variant {variant!r}" if variant is not None else "")
            + "; they come from lm-evaluation-harness multiple-choice logs, inspect_ai logs with logprobs, "
              "or --map prob_<option>=COLUMN at ingest")
    missing = sorted(set(opts.models) - set(frame["model"].to_list()))
    if missing:
        raise NoOptionProbabilities(f"no option probabilities for model(s) {', '.join(missing)} in "
                                    f"{opts.benchmark!r}")
    rows = []
    for model in sorted(set(frame["model"].to_list())):
        row, _ = evaluate_model(frame.filter(pl.col("model") == model), alpha=opts.alpha, method=opts.method,
                                folds=opts.folds, distinguisher=opts.distinguisher, delta=opts.delta,
                                seed=opts.seed, null_draws=opts.null_draws,
                                crossfit_variance=opts.crossfit_variance or "adjusted")
        rows.append(_row(model, row, opts))
    error = None if any(r["n"] for r in rows) else NO_LABELS
    return GofResult(options=opts, variant=variant, models=tuple(rows), error=error)
