"""Near-duplicate items (stats/near_duplicates.py): every pair at or above the threshold that an
exhaustive comparison finds is found, no pair below it is reported, and normalisation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from benchcert.stats.near_duplicates import near_duplicates, normalise, shingles


def _texts(rng, n=300, planted=25):
    vocab = [f"w{i}" for i in range(400)]
    texts = [" ".join(rng.choice(vocab, 30)) for _ in range(n)]
    for t in range(planted):
        src = texts[t].split()
        for pos in rng.choice(len(src), int(rng.integers(0, 4)), replace=False):
            src[pos] = "edit"
        texts.append(" ".join(src).upper() + " ?!")   # case and punctuation do not count
    return texts


def test_finds_every_pair_an_exhaustive_search_finds():
    texts = _texts(np.random.default_rng(1))
    found = near_duplicates(texts, threshold=0.5, seed=3)
    sets = [shingles(t) for t in texts]
    truth = set()
    for i, j in itertools.combinations(range(len(texts)), 2):
        inter = len(sets[i] & sets[j])
        if inter and inter / (len(sets[i]) + len(sets[j]) - inter) >= 0.5:
            truth.add((i, j))
    got = set(zip(found.a.tolist(), found.b.tolist()))
    assert got == truth and len(truth) >= 20
    assert (found.jaccard >= 0.5).all()
    for i, j in got:
        assert found.group[i] == found.group[j] >= 0
    assert (found.group[[k for k in range(len(texts)) if not any(k in p for p in got)]] == -1).all()


def test_normalisation_and_empty_texts():
    assert normalise("  Ｆｕｌｌ-width, CASE!\n") == "full width case"
    r = near_duplicates(["The same question?", "the SAME question", "", None, "other words here"], threshold=0.9)
    assert list(zip(r.a, r.b)) == [(0, 1)] and r.n_empty == 2


def test_validation():
    with pytest.raises(ValueError, match="threshold"):
        near_duplicates(["a"], threshold=0)
    with pytest.raises(ValueError, match="divisible"):
        near_duplicates(["a"], n_perm=10, bands=3)
