"""The compiled packing of a block (stats/comparisons/pack_kernels.py) gives numpy's packing to the last bit.

Oracle: :func:`_packed_bits` (np.packbits of the transposed masks), the popcounts and
:func:`_column_variances` (running sums in blocks of ``rows`` rows) on the same block; and
:func:`pack_binary_scores` with the kernel for every block against it with numpy's form for every
block. Blocks with holes (NaN), subjects in any order and of sizes on both sides of a 64-bit word,
a single subject, row blocks that cut subjects.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchcert.stats.comparisons import packed
from benchcert.stats.comparisons.gram import _packed_bits, _subject_order
from benchcert.stats.comparisons.pack_kernels import pack_block


def _numpy_form(block, codes, rows):
    order, starts = _subject_order(codes)
    ob, xb, first = _packed_bits(block, order, starts, np.arange(block.shape[1]))
    n = np.bitwise_count(ob).sum(axis=1, dtype=np.int64)
    ones = np.bitwise_count(xb).sum(axis=1, dtype=np.int64)
    zeros = np.count_nonzero(block == 0.0, axis=0)
    ss = packed._column_variances(block, ones / np.maximum(n, 1), rows, False)
    return ob, xb, n, ones, zeros, ss, first


@pytest.mark.parametrize("n_items,k,n_subjects,holes,shuffled,rows", [
    (300, 9, 4, 0.0, False, 7),  # subjects of 75 items: a word and a part
    (257, 13, 1, 0.2, False, 64),  # one subject, holes
    (1000, 5, 37, 0.1, True, 100),  # subjects in no order: the rows are taken in subject order
    (64, 3, 2, 0.5, True, 1000),  # a row block longer than the block
])
def test_kernel_gives_numpy_bits_counts_and_variances(n_items, k, n_subjects, holes, shuffled, rows):
    rng = np.random.default_rng(n_items + k)
    block = (rng.random((n_items, k)) < rng.random(k)).astype(float)
    block[rng.random(block.shape) < holes] = np.nan
    codes = np.sort(rng.integers(0, n_subjects, n_items))
    codes = rng.permutation(codes) if shuffled else codes
    ob, xb, n, ones, zeros, ss, first = _numpy_form(block, codes, rows)
    order, starts = _subject_order(codes)
    f, n_words = packed._first_words(starts, n_items)
    got = pack_block(block, np.arange(n_items) if order is None else order, np.r_[starts, n_items], f, n_words, rows)
    np.testing.assert_array_equal(f, first)
    for mine, theirs in zip(got, (ob, xb, n, ones, zeros, ss)):
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
        np.testing.assert_array_equal(mine, theirs)  # the same bits, the same doubles


def test_pack_binary_scores_is_the_same_with_the_kernel(monkeypatch):
    rng = np.random.default_rng(3)
    n_items, k = 500, 150  # more than MIN_PACK_MODELS: blocks narrower than the matrix
    scores = (rng.random((n_items, k)) < 0.6).astype(float)
    scores[rng.random(scores.shape) < 0.05] = np.nan
    codes = rng.integers(0, 23, n_items)

    def blocks():
        return ((lo, min(k, lo + 40), scores[:, lo:lo + 40]) for lo in range(0, k, 40))

    monkeypatch.setattr(packed, "PACK_KERNEL_MIN_CELLS", 1 << 62)
    plain = packed.pack_binary_scores(blocks(), n_items, k, codes)
    monkeypatch.setattr(packed, "PACK_KERNEL_MIN_CELLS", 1)
    assert packed._pack_kernel() is not None  # numba runs in this process (the import above started it)
    compiled = packed.pack_binary_scores(blocks(), n_items, k, codes)
    for name in ("o_bits", "x_bits", "first"):
        np.testing.assert_array_equal(getattr(compiled, name), getattr(plain, name))
    for mine, theirs in zip(compiled.colstats, plain.colstats):
        np.testing.assert_array_equal(mine, theirs)


def test_a_kernel_that_cannot_compile_is_not_retried_per_block(monkeypatch):
    """A failed compilation is remembered (numpy's form packs every later block, the same bits);
    numba not yet loaded is not: the out-of-core read may start it later."""
    import sys

    from benchcert.stats.comparisons import pack_kernels

    calls = []

    def broken(*args):
        calls.append(args)
        raise RuntimeError("no compiler here")

    monkeypatch.setattr(packed, "_kernel_state", {"unavailable": None})
    monkeypatch.delitem(sys.modules, "numba", raising=False)  # what _pack_kernel asks: is numba loaded
    assert packed._pack_kernel() is None and packed._kernel_state["unavailable"] is None
    monkeypatch.undo()
    monkeypatch.setattr(packed, "_kernel_state", {"unavailable": None})
    monkeypatch.setattr(pack_kernels, "pack_block", broken)
    assert packed._pack_kernel() is None and packed._pack_kernel() is None
    assert len(calls) == 1 and packed._kernel_state["unavailable"] == "RuntimeError: no compiler here"
