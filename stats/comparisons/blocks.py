"""Pairwise comparisons computed block pair by block pair of models (memory budget, Dask fan-out).

:func:`_pairwise_blocked` groups the pairs by the model blocks their two models fall in and
computes each group from those columns only; :class:`pair_block_runner` hands the groups to
another executor (tasks/audit/distributed.py), which calls :func:`pair_block` on each.
"""

from __future__ import annotations

import contextvars
import dataclasses
import numbers
from dataclasses import dataclass

import numpy as np

from .._blas import loop_blas_threads
from .engine import _PAIR_INDEX, ComparisonSettings, column_stats
from .gram import _pairwise_core
from .results import PairedComparison


@dataclass(frozen=True)
class PairBlock:
    """One group of a blocked pairwise computation: the pairs whose two models fall in model blocks
    ``blocks`` = (i, j), i <= j, of ``block_models`` columns each.

    ``cols`` are the matrix columns of those blocks (block i's, then block j's when j != i);
    ``pa``/``pb`` index ``cols``; ``index`` is each pair's position in the whole family, and its first
    ``n_pairs`` entries are the group's pairs (a group of one pair lists it twice, see
    :func:`_pair_groups`).
    """

    blocks: tuple[int, int]
    block_models: int
    cols: np.ndarray
    pa: np.ndarray
    pb: np.ndarray
    index: np.ndarray
    n_pairs: int


#: Where the groups of a blocked computation run (:func:`pair_block_runner`): None = here.
_BLOCK_RUNNER: contextvars.ContextVar = contextvars.ContextVar("_BLOCK_RUNNER", default=None)


class pair_block_runner:  # noqa: N801 - used as a context manager, like warnings.catch_warnings
    """Within this context, :func:`pairwise_comparisons` computes its pairs in blocks of ``block_models``
    models and hands the groups to ``run`` instead of computing them here.

    ``run(groups, codes, colstats, alpha=, power=, primary=, all_binary=, family_size=, mde_alpha=)`` returns, for each
    :class:`PairBlock`, what :func:`pair_block` returns on the columns ``group.cols`` of the
    matrix, and raises the groups' warnings here (the Dask fan-out: tasks/audit/distributed.py, whose
    workers read the columns from a Parquet export). Families of many pairs (all pairs: the Gram
    path, O(n_items K^2)) are blocked; a few pairs among many models (the leaderboard family,
    each model against a baseline: O(n_items P), pairs scattered over most pairs of blocks) are
    one group. Blocking changes no number when every compared column is 0/1 (Gram sums of 0/1
    values are exact integers); with other scores the sums of products depend on the order BLAS
    adds them in, so the blocks are then those the computation would use anyway (dense: one
    group), and the result is still the one computed in one process.
    """

    def __init__(self, run, block_models: int):
        if isinstance(block_models, bool) or not isinstance(block_models, numbers.Integral) or block_models < 2:
            raise ValueError(f"block_models must be an integer >= 2; got {block_models!r}")
        self.run, self.block_models = run, int(block_models)
        self._token = None

    def __enter__(self):
        self._token = _BLOCK_RUNNER.set(self)
        return self

    def __exit__(self, *exc):
        _BLOCK_RUNNER.reset(self._token)
        return False


def pair_block(s_cols, codes, group: PairBlock, colstats, *, alpha, power, primary, all_binary,
               family_size=1, mde_alpha=None) -> PairedComparison:
    """The pairs of one group, from the columns ``group.cols`` of the score matrix (``s_cols``) alone.

    What :func:`_pairwise_blocked` computes for the group. ``colstats`` are the (count, mean,
    variance) of those columns as computed on the whole matrix (:func:`column_stats`; numpy
    sums a column of a narrower array in another order, so they are passed, not recomputed).
    Warnings name the pairs by their position in the whole family.
    """
    s_cols = np.asarray(s_cols, dtype=float)
    if s_cols.shape[1] != group.cols.size or any(np.shape(c) != (group.cols.size,) for c in colstats):
        raise ValueError(f"s_cols and colstats must hold the group's {group.cols.size} columns; got "
                         f"{s_cols.shape[1]} and {[np.shape(c) for c in colstats]}")
    token = _PAIR_INDEX.set(group.index)
    try:
        with loop_blas_threads():
            return _pairwise_core(s_cols, codes, group.pa, group.pb,
                                  ComparisonSettings(alpha=alpha, power=power, primary=primary, all_binary=all_binary,
                                                     family_size=family_size, mde_alpha=mde_alpha),
                                  cols=group.cols, colstats=colstats, colstats_of_cols=True)
    finally:
        _PAIR_INDEX.reset(token)


def _pair_groups(k: int, pa: np.ndarray, pb: np.ndarray, bm: int):
    """The pairs grouped by the model blocks (of ``bm`` columns) of their two models (a generator of
    :class:`PairBlock`)."""
    nb = -(-k // bm)
    lo_b, hi_b = np.minimum(pa, pb) // bm, np.maximum(pa, pb) // bm
    key = lo_b * nb + hi_b
    order = np.argsort(key, kind="stable")
    bounds = np.flatnonzero(np.r_[True, np.diff(key[order]) != 0, True])
    for g0, g1 in zip(bounds[:-1], bounds[1:]):
        idx = order[g0:g1]
        i, j = int(lo_b[idx[0]]), int(hi_b[idx[0]])
        cols = np.r_[np.arange(i * bm, min((i + 1) * bm, k)),
                     np.arange(j * bm, min((j + 1) * bm, k)) if j != i else np.zeros(0, np.int64)].astype(np.intp)
        local = np.full(k, -1, dtype=np.intp)
        local[cols] = np.arange(cols.size)
        # A group of one pair is computed twice over: numpy sums a (C, 1) array along C in another
        # order (pairwise) than the columns of a (C, P) array, and the last bit would differ (unless
        # the family is that one pair, which the dense computation sums as a (C, 1) array too).
        run = idx if idx.size > 1 or pa.size == 1 else np.r_[idx, idx]
        yield PairBlock(blocks=(i, j), block_models=bm, cols=cols, pa=local[pa[run]], pb=local[pb[run]], index=run,
                        n_pairs=idx.size)


def _pairwise_blocked(s, codes, pa, pb, settings: ComparisonSettings, bm: int, runner=None):
    """:func:`_pairwise_core` block pair by block pair of models; results scattered into place.

    Pairs are grouped by the model blocks (of ``bm`` columns) of their two models; each group
    is computed from the columns of its (at most two) blocks only, so the per-subject
    statistics held at once are C x (at most bm^2) instead of C x P, and the Gram products
    total about twice those of the dense path. Every per-pair number is the dense one
    (tested); warnings name the pairs by their position in the whole family. With a
    ``runner`` (:class:`pair_block_runner`) the groups are computed by it (on a Dask cluster).
    """
    colstats = column_stats(s)

    def local(group):
        return _pairwise_core(s[:, group.cols], codes, group.pa, group.pb, settings, cols=group.cols,
                              colstats=colstats)

    return _blocked_groups(s.shape[1], codes, pa, pb, settings, bm, colstats, local, runner)


def _blocked_groups(k, codes, pa, pb, settings: ComparisonSettings, bm: int, colstats, local, runner=None):
    """The groups of :func:`_pairwise_blocked` over ``k`` columns, each computed by ``local(group)``
    (with the group's positions in the family set for its warnings) or by the ``runner``; results
    scattered into place. ``colstats``: the whole matrix's :func:`column_stats`, for the runner."""
    if bm >= k:  # one group: the dense computation itself, wherever the runner computes it
        groups = [PairBlock(blocks=(0, 0), block_models=k, cols=np.arange(k, dtype=np.intp), pa=pa, pb=pb,
                            index=np.arange(pa.size), n_pairs=pa.size)]
    else:
        groups = _pair_groups(k, pa, pb, bm)
    if runner is not None:
        groups = list(groups)
        done = zip(groups, runner.run(groups, codes, colstats, alpha=settings.alpha, power=settings.power,
                                      primary=settings.primary, all_binary=settings.all_binary,
                                      family_size=settings.family_size, mde_alpha=settings.mde_alpha))
    else:

        def here(group):
            token = _PAIR_INDEX.set(group.index)
            try:
                return local(group)
            finally:
                _PAIR_INDEX.reset(token)

        done = ((g, here(g)) for g in groups)  # one group's index arrays at a time
    out = None
    for group, part in done:
        idx = group.index[:group.n_pairs]
        if out is None:
            out = _empty_like_result(part, pa.size)
        _scatter(out, part, idx, idx.size)
    return dataclasses.replace(out["result"], pair_a=pa, pair_b=pb, **out["fields"],
                               tests={name: dataclasses.replace(t0, **out["tests"][name])
                                      for name, t0 in out["result"].tests.items()})


def _empty_like_result(part, size):
    fields = {f.name: np.empty(size, dtype=np.asarray(getattr(part, f.name)).dtype)
              for f in dataclasses.fields(part)
              if isinstance(getattr(part, f.name), np.ndarray) and f.name not in ("pair_a", "pair_b")}
    tests = {name: {f.name: np.empty(size, dtype=np.asarray(getattr(t, f.name)).dtype)
                    for f in dataclasses.fields(t) if isinstance(getattr(t, f.name), np.ndarray)}
             for name, t in part.tests.items()}
    return {"result": part, "fields": fields, "tests": tests}


def _scatter(out, part, idx, m):
    for name, arr in out["fields"].items():
        arr[idx] = getattr(part, name)[:m]
    for tname, fields in out["tests"].items():
        t = part.tests[tname]
        for name, arr in fields.items():
            arr[idx] = getattr(t, name)[:m]


