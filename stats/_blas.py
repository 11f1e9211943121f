"""BLAS threads for loops of small matrix products.

A multithreaded BLAS (OpenBLAS by default in numpy's wheels) starts and synchronises its
threads on every call. For the products this package runs in Python loops - one Gram
matrix per subject in the pairwise comparisons, one (splits x items) @ (items x models)
product per subject in the shuffled split-half - each call is small, so the threads add
overhead without speed-up, and on a machine shared with other processes they wait on
each other: on this 2-CPU machine at load average 7, the per-subject Gram loop of a
300-model comparison (200 subjects of 20 items) took 2.70 s wall (1.11 s CPU) with
OpenBLAS's default 2 threads against 0.24 s (0.08 s CPU) with one
(``benchmarks/blas_threads.py --quick``; without ``--quick``: 1,000 models x 20,000 items). One large product (a model-model correlation) still
gets every thread: the limit is applied only around the loops.

:data:`LOOP_BLAS_THREADS` (default 1) is the number used inside those loops; the
environment variable ``BENCHCERT_LOOP_BLAS_THREADS`` overrides it (e.g. on a dedicated
many-core machine where each product is large).
"""

from __future__ import annotations

import contextlib
import os

from threadpoolctl import threadpool_limits

__all__ = ["LOOP_BLAS_THREADS", "loop_blas_threads"]


def _from_env() -> int:
    raw = os.environ.get("BENCHCERT_LOOP_BLAS_THREADS", "1")
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"BENCHCERT_LOOP_BLAS_THREADS must be a positive integer; got {raw!r}") from None
    if value < 1:
        raise ValueError(f"BENCHCERT_LOOP_BLAS_THREADS must be a positive integer; got {raw!r}")
    return value


LOOP_BLAS_THREADS = _from_env()


@contextlib.contextmanager
def loop_blas_threads(threads: int | None = None):
    """Limit BLAS to ``threads`` (default :data:`LOOP_BLAS_THREADS`) for the enclosed loop.

    The previous limits are restored on exit, also on error.
    """
    n = LOOP_BLAS_THREADS if threads is None else int(threads)
    with threadpool_limits(limits=n, user_api="blas"):
        yield
