"""A small generated pairwise-preference benchmark scored by a model judge, with a human-labelled subset.

AlpacaEval-style: for each instruction a model's answer is compared with a reference answer;
``preference`` is the judge's (1 = reference preferred, 2 = the model's), ``human_preference`` a
person's on the labelled instructions (blank elsewhere).  The judge is lenient (:func:`judge_of`).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

#: model -> probability that people prefer its answer (the human-scale truth of an infinite benchmark)
MODELS = {"base": 0.45, "cand": 0.62, "other": 0.60}
MAP = ["item_id=instruction", "score=preference - 1", "human_score=human_preference - 1"]


def judge_of(human: np.ndarray, rng: np.random.Generator, p11: float = 5 / 6, p10: float = 0.5) -> np.ndarray:
    """A lenient judge: says 1 with probability ``p11`` where people say 1 and ``p10`` where they say 0
    (issue #28's setting: at a human rate of 0.6, judge mean 0.70 (+10 pp) and 70% agreement)."""
    u = rng.random(human.size)
    return np.where(human == 1, u < p11, u < p10).astype(float)


def write_preferences(path: Path, *, n_items: int = 400, n_labelled: int = 120, seed: int = 7,
                      chosen_by_judge: bool = False, models: dict | None = None) -> dict:
    """Write the benchmark as CSV; return {model: (human, judge, labelled mask)} as numpy arrays.

    ``chosen_by_judge``: label only the items the judge preferred the model on (not at random).
    """
    rng = np.random.default_rng(seed)
    labelled = np.zeros(n_items, bool)
    labelled[rng.choice(n_items, n_labelled, replace=False)] = True
    truth, rows = {}, []
    for name, p in (models or MODELS).items():
        human = (rng.random(n_items) < p).astype(float)
        judge = judge_of(human, rng)
        lab = (judge == 1.0) & labelled if chosen_by_judge else labelled
        truth[name] = (human, judge, lab)
        rows += [{"model": name, "instruction": f"q{i:04d}", "preference": f"{1 + judge[i]:g}",
                  "human_preference": f"{1 + human[i]:g}" if lab[i] else ""} for i in range(n_items)]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return truth
