"""A cold dashboard build's run folders shared among forked processes, one per core (issue #37).

A first or ``--full`` build of 50 benchmarks x 200 runs renders 10,000 run pages and makes 10,000 folders with
40,000 files: about half of its time, and each run's folder is independent of the others'.  :func:`run_split`
runs such independent jobs (one per benchmark: its run folders) in ``workers`` processes: the build forks
``workers - 1`` children after every run has been read (they inherit the records, nothing is sent to them),
each child does its share of the jobs and sends their small results back through a pipe, and the parent does
the rest and its own work (the benchmark pages, whose trends use polars: a fork copies only the calling thread,
not polars' thread pool, so a child that used polars would wait for it forever) and returns every job's result
in the jobs' order, so what the build writes does not depend on who wrote it
(tests/tasks/render/test_dashboard_fork.py: the same bytes as a one-process build).

It is asked for (``dashboard build --processes N``; one process by default): on the 2-core machine it was
measured on (docs/scale.md) two processes took a 50 x 200 cold build from 18.8 s to 11.8 s wall when the
machine was idle (load 1.4-2.1), but did not shorten it while other work ran (load 5-10), and cost CPU.  The split costs CPU, not saves
it: each process touches the records it renders (copy-on-write pages), and the
children's CPU is the build's too (``benchmarks/dashboard_build.py`` counts it).  It is used only where it is
safe and may pay (:func:`fork_workers`): a cold build of at least :data:`FORK_MIN_RUNS` runs, in a process with no
other thread (forking a threaded process, as a Prefect worker is, can leave a lock held forever in the child),
on a system with ``os.fork`` and more than one core this process may use.
"""

from __future__ import annotations

import os
import pickle
import threading
import traceback
from dataclasses import dataclass
from typing import Callable, Generic, Sequence, TypeVar

__all__ = ["FORK_MIN_RUNS", "MAX_WORKERS", "Split", "fork_workers", "run_split"]

T = TypeVar("T")
R = TypeVar("R")
P = TypeVar("P")

#: A cold build of fewer runs stays in one process (forking and the copied pages would cost more than they save).
FORK_MIN_RUNS = 2000
#: At most this many processes (each holds its own copy of the records it touches).
MAX_WORKERS = 4


def fork_workers(n_runs: int, processes: int) -> int:
    """How many processes a cold build of ``n_runs`` runs uses when asked for ``processes``: 1, or up to
    ``processes`` (at most :data:`MAX_WORKERS` and the cores this process may use) when it has at least
    :data:`FORK_MIN_RUNS` runs, the system can fork, and this process runs no other thread."""
    if processes <= 1 or n_runs < FORK_MIN_RUNS or not hasattr(os, "fork") or threading.active_count() != 1:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(processes, cores, MAX_WORKERS))


def _shares(weights: Sequence[int], workers: int, parent_load: int) -> list[list[int]]:
    """The jobs' indices in ``workers`` shares of about equal weight, the first (the parent's) starting at
    ``parent_load`` (the heaviest job first to the lightest share)."""
    shares: list[list[int]] = [[] for _ in range(workers)]
    load = [parent_load] + [0] * (workers - 1)
    for i in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        k = load.index(min(load))
        shares[k].append(i)
        load[k] += weights[i]
    return shares


def _failure(exc: BaseException) -> BaseException:
    """What a child sends back for ``exc``: the exception itself with its traceback as a note (so the build
    fails as a one-process build would), or a RuntimeError with that text when it cannot be pickled."""
    text = traceback.format_exc()
    try:
        exc.add_note(f"raised in a forked share of the dashboard build:\n{text}")
        pickle.dumps(exc)
        return exc
    except Exception:  # noqa: BLE001 - an exception that cannot travel: its text does
        return RuntimeError(f"a forked share of the dashboard build failed:\n{text}")


def _child(job: Callable[[T], R], jobs: Sequence[T], share: list[int], fd: int) -> None:
    """Run the share's jobs and write ``(ok, results or the exception)`` to ``fd``; never returns (``os._exit``:
    no handler or ``finally`` of the parent's code runs in the child)."""
    code = 1
    try:
        try:
            payload = (True, [(i, job(jobs[i])) for i in share])
        except BaseException as exc:  # noqa: BLE001 - the parent raises it
            payload = (False, _failure(exc))
        with os.fdopen(fd, "wb") as out:
            pickle.dump(payload, out, protocol=pickle.HIGHEST_PROTOCOL)
        code = 0 if payload[0] else 1
    finally:
        os._exit(code)


@dataclass(frozen=True)
class Split(Generic[R, P]):
    """What :func:`run_split` returns: each job's result in the jobs' order, and the parent's own work's."""

    results: list[R]
    parent: P


def run_split(jobs: Sequence[T], job: Callable[[T], R], *, weights: Sequence[int], workers: int,
              parent: tuple[Callable[[], P], int]) -> Split[R, P]:
    """``[job(j) for j in jobs]``, the jobs shared among ``workers`` processes (``workers - 1`` forked here), and
    ``parent[0]()`` run by this process beside its share (``parent[1]``: its weight in the jobs' units).

    ``job`` must only write files and return a picklable result (what a child changes in its memory is lost),
    and must not use a library's thread pool (polars'): a fork copies the calling thread only.  The parent's
    share and its own work run first, then each child's results are read; if any share fails, every child is
    waited for and the parent's own exception, or the first failed child's (with its traceback as a note), is
    raised.
    """
    work, weight = parent
    if workers <= 1 or len(jobs) <= 1:
        results = [job(j) for j in jobs]
        return Split(results, work())
    shares = _shares(weights, min(workers, len(jobs) + 1), weight)
    children: list[tuple[int, int]] = []  # (pid, read end)
    try:
        for share in (s for s in shares[1:] if s):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child
                os.close(read)
                _child(job, jobs, share, write)
            os.close(write)
            children.append((pid, read))
        done: dict[int, R] = {i: job(jobs[i]) for i in shares[0]}
        own = work()
    finally:
        got = [_collect(pid, read) for pid, read in children]
    for ok, payload in got:
        if not ok:
            raise payload
        done.update(payload)
    return Split([done[i] for i in range(len(jobs))], own)


def _collect(pid: int, read: int) -> tuple[bool, object]:
    """A child's ``(ok, payload)`` (read to the end, then the child reaped)."""
    with os.fdopen(read, "rb") as src:
        data = src.read()
    _, status = os.waitpid(pid, 0)
    try:
        ok, payload = pickle.loads(data)
    except Exception:  # noqa: BLE001 - a child that died before writing (killed, out of memory)
        return False, RuntimeError(f"a forked share of the dashboard build ended without its result (wait status "
                                   f"{status})")
    return ok and status == 0, payload
