"""A cold dashboard build shared among forked processes, one per core (issue #37).

A first or ``--full`` build of 50 benchmarks x 200 runs parses 10,000 summaries, renders 10,000 run pages and
50 benchmark pages and makes 10,000 folders with 40,000 files; each benchmark's part is independent of the
others', and only the cross-run pages (overview, grid, model and training-run pages) need every run.  The build
(tasks/render/dashboard.py ``_split_build``) forks its children with :func:`fork_shares` before it reads any
run: each child reads its benchmarks' runs, writes their records to a file and calls ``signal()``
(:meth:`Child.ready` returns in the parent), then writes its benchmarks' run folders and pages and returns the
site manifest's entries through a pipe (:func:`finish`).  Nothing but records travels: a child inherits no
record, and no polars runs before the forks (a fork copies only the calling thread, not polars' thread pool).
What the build writes does not depend on who wrote it (tests/tasks/render/test_dashboard_fork.py: the same
bytes as a one-process build).

Two processes are the default for a cold build of at least :data:`FORK_MIN_RUNS` runs (``dashboard build
--processes N``; 1 for one process): measured on the project's 2-core machine (docs/scale.md) they take about
the CPU seconds of one process (each parses and renders its own runs; the parent also decodes the children's
records, about a quarter of parsing them) in a little over half its wall time.  It is used only where it is
safe and may pay (:func:`fork_workers`): in a process with no other thread (forking a threaded process, as a
Prefect worker is, can leave a lock held forever in the child), on a system with ``os.fork`` and more than one
core this process may use.
"""

from __future__ import annotations

import os
import pickle
import threading
import traceback
from typing import Callable, Sequence, TypeVar

__all__ = ["AUTO_WORKERS", "FORK_MIN_RUNS", "MAX_WORKERS", "Child", "finish", "finish_quietly", "fork_shares", "fork_workers", "shares"]

R = TypeVar("R")
S = TypeVar("S")

#: A cold build of fewer runs stays in one process (forking and the copied pages would cost more than they save).
FORK_MIN_RUNS = 2000
#: At most this many processes (each holds its own copy of the records it touches).
MAX_WORKERS = 4


#: Processes a cold build of many runs uses when none is asked for (``processes=None``), at most the usable cores.
AUTO_WORKERS = 2


def fork_workers(n_runs: int, processes: int | None) -> int:
    """How many processes a cold build of ``n_runs`` runs uses when asked for ``processes`` (None: automatic,
    :data:`AUTO_WORKERS`): 1, or up to ``processes`` (at most :data:`MAX_WORKERS` and the cores this process may
    use) when it has at least :data:`FORK_MIN_RUNS` runs, the system can fork, and this process runs no other
    thread."""
    if processes is None:
        processes = AUTO_WORKERS
    if processes <= 1 or n_runs < FORK_MIN_RUNS or not hasattr(os, "fork") or threading.active_count() != 1:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(processes, cores, MAX_WORKERS))


def shares(weights: Sequence[int], workers: int, parent_load: int) -> list[list[int]]:
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


class Child:
    """A forked share's process (:func:`fork_shares`): wait for its early output with :meth:`ready` (which raises
    the child's exception when it failed first); its result is taken by :func:`finish`."""

    def __init__(self, pid: int, ready_fd: int, result_fd: int):
        self.pid, self._ready, self._result = pid, ready_fd, result_fd
        self._done: tuple[bool, object] | None = None

    def ready(self) -> None:
        """Wait until the child calls its ``signal`` (its early output is written); raise its exception if it
        ended without doing so."""
        if self._ready >= 0:
            got = os.read(self._ready, 1)
            os.close(self._ready)
            self._ready = -1
            if got:
                return
        ok, payload = self._finish()
        if not ok:
            raise payload
        raise RuntimeError("a forked share of the dashboard build ended without its early output")

    def _finish(self) -> tuple[bool, object]:
        if self._done is None:
            if self._ready >= 0:
                os.close(self._ready)
                self._ready = -1
            self._done = _collect(self.pid, self._result)
        return self._done


def _child(work: Callable[[S, Callable[[], None]], R], share: S, ready_fd: int, result_fd: int) -> None:
    """Run ``work(share, signal)`` and write ``(ok, result or the exception)`` to ``result_fd``; ``signal()`` writes
    one byte to ``ready_fd``.  Never returns (``os._exit``: no handler or ``finally`` of the parent's code runs in
    the child)."""
    code = 1
    try:
        try:
            payload = (True, work(share, lambda: os.write(ready_fd, b"1")))
        except BaseException as exc:  # noqa: BLE001 - the parent raises it
            payload = (False, _failure(exc))
        with os.fdopen(result_fd, "wb") as out:
            pickle.dump(payload, out, protocol=pickle.HIGHEST_PROTOCOL)
        code = 0 if payload[0] else 1
    finally:
        os._exit(code)


def fork_shares(shares: Sequence[S], work: Callable[[S, Callable[[], None]], R]) -> list[Child]:
    """Fork one process per share, each running ``work(share, signal)``: it calls ``signal()`` once its early
    output (files it writes) is there, and returns a picklable result.  ``work`` must not use a thread pool this
    process started before the fork (polars'): a fork copies the calling thread only.  The caller takes each
    child's early output after :meth:`Child.ready`, and the results with :func:`finish`, which reaps every child
    (:func:`finish_quietly` when the caller fails itself).  When a pipe or a fork fails, the children forked so far
    are reaped and that error is raised (their own failures are not: they are its consequence or beside it)."""
    children: list[Child] = []
    for share in shares:
        fds: list[int] = []  # this pass's pipes, closed if the pass fails
        try:
            for _ in range(2):
                fds += os.pipe()
            ready_r, ready_w, result_r, result_w = fds
            pid = os.fork()
        except BaseException:  # the fork's own error (EAGAIN, ENOMEM) is raised once the children are reaped
            for fd in fds:
                os.close(fd)
            finish_quietly(children)
            raise
        if pid == 0:  # the child: the read ends are the parent's
            os.close(ready_r)
            os.close(result_r)
            _child(work, share, ready_w, result_w)
        os.close(ready_w)
        os.close(result_w)
        children.append(Child(pid, ready_r, result_r))
    return children


def finish(children: Sequence[Child]) -> list:
    """Every child's result, in order, each child waited for and reaped; the first failed child's exception (with
    its traceback as a note) raised once all have ended."""
    done = [c._finish() for c in children]
    for ok, payload in done:
        if not ok:
            raise payload
    return [payload for _, payload in done]


def finish_quietly(children: Sequence[Child]) -> None:
    """Wait for and reap every child, whatever it did (the parent is failing already)."""
    for c in children:
        c._finish()


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
