"""Compiled by numba: one block of :func:`~benchcert.stats.comparisons.pack_binary_scores` in two passes
over its rows (its bits and counts, then its columns' squared deviations) instead of about a dozen
numpy passes and their temporaries (a mask, its transposed copy, the packing, the popcounts, the
deviations and their running sums): at a billion responses about 15 CPU s of an out-of-core
audit's read (issue #40, docs/scale.md).

Each result is the numpy form's to the last bit (tests/stats/comparisons/test_pack_kernels.py): the
bits are set where :func:`numpy.packbits` (big-endian within each byte) puts them, the counts are
exact integers, and each column's squared deviations are added in row order within each block of
``rows`` rows, then block after block, as the running sums (``cumsum``) of
:func:`~benchcert.stats.comparisons.packed._column_variances` add them (numba compiles without
fast-math: no addition is reordered or fused).

Compiled with ``cache=True`` (once per machine), like the store read's loops
(tasks/store/dense_kernels.py); used only where numba already runs (an out-of-core read starts it).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def pack_block(block, order, bounds, first, n_words, rows):  # pragma: no cover - compiled; tested against numpy
    """(o_bits, x_bits, n, ones, zeros, ss) of a block of columns: ``block`` (n_items, w), its rows
    taken in ``order`` (subject order), subject k at positions bounds[k]..bounds[k + 1] - 1 starting
    at word first[k] of ``n_words``; ss as ``_column_variances(block, ones / max(n, 1), rows, False)``."""
    n_items, w = block.shape
    o_bits = np.zeros((w, n_words), np.uint64)
    x_bits = np.zeros((w, n_words), np.uint64)
    n = np.zeros(w, np.int64)
    ones = np.zeros(w, np.int64)
    zeros = np.zeros(w, np.int64)
    one = np.uint64(1)
    for k in range(bounds.size - 1):
        for p in range(bounds[k], bounds[k + 1]):
            rel = p - bounds[k]
            word = first[k] + rel // 64
            i = rel % 64
            mask = one << np.uint64((i // 8) * 8 + 7 - i % 8)  # packbits' bit order, read as little-endian words
            r = order[p]
            for c in range(w):  # without branches: scores are 0/1 at random, a branch mispredicts half the time
                v = block[r, c]
                is_o = v == v
                is_x = v == 1.0
                o_bits[c, word] |= mask * np.uint64(is_o)
                x_bits[c, word] |= mask * np.uint64(is_x)
                n[c] += is_o
                ones[c] += is_x
                zeros[c] += v == 0.0
    mean = np.empty(w)
    for c in range(w):
        mean[c] = ones[c] / max(n[c], 1)
    ss = np.zeros(w)
    part = np.empty(w)
    for lo in range(0, n_items, rows):
        part[:] = 0.0
        for r in range(lo, min(n_items, lo + rows)):
            for c in range(w):
                v = block[r, c]
                d = v - mean[c]
                if v != v:
                    d = 0.0
                part[c] += d * d
        for c in range(w):
            ss[c] += part[c]
    return o_bits, x_bits, n, ones, zeros, ss
