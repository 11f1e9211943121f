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

__all__ = ["LOOP_BLAS_THREADS", "MAX_LOOP_BLAS_THREADS", "SettingError", "loop_blas_threads"]

#: The most threads the variable may name (more is no machine's BLAS; 30 digits overflowed a C int).
MAX_LOOP_BLAS_THREADS = 1024


class SettingError(ValueError):
    """An environment variable holds no usable value: the user's setting, not the data.

    ``setting`` names the variable; the command line reports it as a usage error (exit 2).
    """

    def __init__(self, message: str, setting: str):
        super().__init__(message)
        self.setting = setting


def _from_env() -> int:
    raw = os.environ.get("BENCHCERT_LOOP_BLAS_THREADS", "1")
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_LOOP_BLAS_THREADS:
        raise SettingError(f"BENCHCERT_LOOP_BLAS_THREADS={raw!r} is not a whole number from 1 to "
                           f"{MAX_LOOP_BLAS_THREADS}; set it to one (e.g. 1) or unset it for the default",
                           "BENCHCERT_LOOP_BLAS_THREADS")
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
