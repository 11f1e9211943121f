"""Which models a run flags as regressed: the rule, written once.

A model regressed when its score fell below the previous run's interval, or when a checkpoint
verdict of the run says "regressed".  The run's changes (tasks/audit/changes.py, summary.json's
``changes.regressions``) and the dashboard's runs (tasks/render/run_records.py, read from the
artifacts) both ask this function.
"""

from __future__ import annotations

from collections.abc import Iterable


def regressed_models(moved_down: Iterable[str], verdicts: Iterable[tuple[object, object]]) -> list[str]:
    """The regressed models, sorted.

    Parameters
    ----------
    moved_down : iterable of str
        Models whose score left the previous run's interval downwards.
    verdicts : iterable of (model, verdict)
        The run's verdicts; those whose verdict is ``"regressed"`` count.
    """
    return sorted(set(moved_down) | {str(model) for model, verdict in verdicts if verdict == "regressed"})
