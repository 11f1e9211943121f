"""Compiled loops of the streamed store read (tasks/store/dense_read.py): the scatter of each
Arrow batch into a block buffer and the transpose of the block into the matrix.

numpy does both (fancy-index assignment, a transposed copy), but its scatter first converts the
32-bit positions to 64-bit ones and its transpose copies each group of rows before writing it:
at 80M responses that is about 0.3 CPU s of a read whose DuckDB part is about 0.25. These loops
are compiled by numba (``cache=True``: once per machine, in ``__pycache__`` or numba's user
cache) and release the GIL, so the transpose runs on two threads while DuckDB reads the next
block. The scatter also puts each response in its matrix row (the buffer is models x matrix
rows), so the transpose reads every row in order whatever order the store's item codes are in.
Starting numba costs about 0.5 s once per process, so only a process that reads many cells comes
here (:data:`benchcert.tasks.store.dense_read.COMPILED_MIN_CELLS`); others take numpy's way. Both
give the same matrix to the last bit: each cell is one stored score, copied
(tests/tasks/store/test_dense_read.py runs the read both ways against the general read).

numba checks no bounds: the scatter checks each position and item, and the read checks the
transpose's indices before it calls it.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def scatter_rows(flat, pos, score, row_of, shift, row_len):  # pragma: no cover - compiled; tested through the read
    """``flat[(p >> shift) * row_len + row_of[p & (2^shift - 1)]] = score[k]`` for each position
    p = pos[k]: a block buffer of models x matrix rows. Returns -1, or the first k whose
    position falls outside ``flat`` or whose item has no row (nothing is written from it on)."""
    n = flat.size
    mask = (1 << shift) - 1
    n_codes = row_of.size
    for k in range(pos.size):
        p = pos[k]
        item = p & mask
        if p < 0 or item >= n_codes:
            return k
        r = row_of[item]
        at = (p >> shift) * row_len + r
        if r < 0 or at >= n:
            return k
        flat[at] = score[k]
    return -1


@numba.njit(nogil=True, cache=True)
def transpose(out, block, rows, kept, targets, group, tile):  # pragma: no cover - compiled
    """``out[r, targets[j]] = block[kept[j], rows[r]]`` for every row r and j, in tiles of
    ``tile`` rows by ``group`` columns of ``out``: each tile reads ``tile`` consecutive values of
    each of ``group`` rows of ``block`` (whole cache lines) and writes ``tile`` runs of ``group``
    values of ``out``'s rows, both of which stay in cache while the tile is written."""
    n_rows = rows.size
    for g0 in range(0, kept.size, group):
        g1 = min(g0 + group, kept.size)
        for r0 in range(0, n_rows, tile):
            r1 = min(r0 + tile, n_rows)
            for j in range(g0, g1):
                src = block[kept[j]]
                t = targets[j]
                for r in range(r0, r1):
                    out[r, t] = src[rows[r]]
