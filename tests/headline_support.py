"""The code-benchmark-like matrix of issue #25 finding 4, shared by the headline tests."""

from __future__ import annotations

import numpy as np
import polars as pl

from benchcert.tasks.store.matrices import BenchmarkMatrices


def code_benchmark(seed: int = 0) -> BenchmarkMatrices:
    """16 models x 1,055 items in 3 subjects of unequal size, difficulty as subject (one domain each)."""
    rng = np.random.default_rng(seed)
    sizes = {"easy": 400, "medium": 435, "hard": 220}
    offset = {"easy": 1.5, "medium": 0.0, "hard": -1.5}
    frames = []
    for j, skill in enumerate(np.linspace(-1.5, 2.0, 16)):
        for subj, n in sizes.items():
            p = 1 / (1 + np.exp(-(skill + offset[subj])))
            frames.append(pl.DataFrame({"model": f"m{j:02d}", "item_id": [f"{subj}-{i}" for i in range(n)],
                                        "subject": subj, "domain": subj,
                                        "score": (rng.random(n) < p).astype(float)}))
    return BenchmarkMatrices("code", "", pl.concat(frames))
