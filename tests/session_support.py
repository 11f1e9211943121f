"""The session's server processes, and what an interrupted run leaves behind: nothing (issue #33).

The suite starts processes of its own: a Prefect API server (prefect_test_harness runs uvicorn as
a subprocess), a Dask LocalCluster's worker processes, browsers, servers and command lines of
single tests, and with pytest-xdist a worker process per core, each with its own session
fixtures. Interrupting a run used to leave the Prefect server running:

- SIGTERM (``kill``) ended pytest without a word: no fixture's teardown ran. Here SIGTERM raises
  KeyboardInterrupt, as Ctrl-C does, so pytest stops the way it stops on Ctrl-C.
- Ctrl-C at a terminal signals its whole process group, which held the Prefect server: the
  server stopped at once, and a flow interrupted mid-run spent a minute retrying to report its
  crash to it before pytest could stop. ``prefect_harness`` starts the server in a session of
  its own and stops it itself; after an interrupt it skips the harness' drain of log and event
  workers to the server and goes straight to stopping it.
- an xdist worker hears of the controller's interrupt through execnet, which waits 5 s before
  interrupting the worker and kills it 10 s later, teardown or not. The controller passes the
  interrupt (SIGINT or SIGTERM) on to the workers at once, as a SIGINT.
- whatever still runs (a teardown cut short, a process whose parent was killed) is ended by the
  process that started the run: every pytest process of the suite is a child subreaper (Linux),
  so the children of a killed worker become its children, and after an interrupt each one ends
  its remaining descendants before it exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

import pytest

# After an interrupt, teardown must not wait on servers and the last hook ends what is left.
INTERRUPTED = threading.Event()
_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _is_xdist_controller(config) -> bool:
    return not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None) not in (None, 0)


def _forward_to_children(signum: int) -> None:
    """Pass the signal on to the xdist workers (the controller's only children that run tests)."""
    import psutil

    for child in psutil.Process().children():
        try:
            child.send_signal(signum)
        except psutil.Error:
            pass


def _install_handlers(config) -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    controller = _is_xdist_controller(config)
    worker = hasattr(config, "workerinput")

    def on_signal(signum, frame):
        first = not INTERRUPTED.is_set()
        INTERRUPTED.set()
        if worker and not first:
            # Ctrl-C reaches a worker twice (from the terminal and from the controller); the
            # second must not cut its teardown short. The controller still kills it if it hangs.
            return
        if controller and first:
            _forward_to_children(signal.SIGINT)
        raise KeyboardInterrupt(f"{signal.Signals(signum).name} received")

    signal.signal(signal.SIGTERM, on_signal)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when a caller chose otherwise
        signal.signal(signal.SIGINT, on_signal)


def end_descendants(grace: float = 5.0) -> list[int]:
    """Terminate every process descended from this one (then kill what is left after ``grace``
    seconds); the pids it had to end."""
    import psutil

    try:
        procs = psutil.Process().children(recursive=True)
    except psutil.Error:
        return []
    live = []
    for p in procs:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                p.terminate()
                live.append(p)
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(live, timeout=grace)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=grace)
    for p in procs:  # reap the zombies a subreaper inherited
        try:
            os.waitpid(p.pid, os.WNOHANG)
        except OSError:
            pass
    return [p.pid for p in live]


def pytest_configure(config):
    _become_subreaper()
    _install_handlers(config)


def pytest_keyboard_interrupt(excinfo):
    INTERRUPTED.set()


def pytest_unconfigure(config):
    if INTERRUPTED.is_set():
        end_descendants()


class _OwnSession:
    """The subprocess module, but Popen starts its process in a session of its own."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return getattr(self._module, name)

    def Popen(self, *args, **kwargs):  # noqa: N802 (subprocess' name)
        return self._module.Popen(*args, start_new_session=True, **kwargs)


@contextlib.contextmanager
def _servers_in_their_own_session():
    """Start Prefect's API server out of the terminal's process group. Ctrl-C at a terminal
    signals the whole group: the server stopped at once, and a flow interrupted mid-run spent a
    minute retrying to report its crash to it before pytest could stop. Out of the group it lives
    until the fixture stops it (or, if teardown is cut short, until end_descendants does)."""
    import prefect.server.api.server as server_module

    module = server_module.subprocess
    server_module.subprocess = _OwnSession(module)
    try:
        yield
    finally:
        server_module.subprocess = module


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect API for every flow test of the session (its start costs seconds)."""
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.testing.utilities import prefect_test_harness

    harness = prefect_test_harness(server_startup_timeout=None)
    with _servers_in_their_own_session():
        harness.__enter__()
    server = SubprocessASGIServer._instances.get(None)
    try:
        yield
    finally:
        if INTERRUPTED.is_set():
            # Closing the harness with an exception skips its drain of logs to the server (which
            # a terminal's Ctrl-C has stopped already) and restores the settings it changed.
            harness.__exit__(KeyboardInterrupt, KeyboardInterrupt(), None)
            if server is not None:
                server.stop()
        else:
            harness.__exit__(None, None, None)


@pytest.fixture(scope="session")
def dask_address():
    """One LocalCluster of 2 worker processes shared by every Dask test of the session (its start
    costs seconds); the tests reach it by address, as a remote cluster is reached."""
    from benchcert.tasks.audit.distributed import dask_cluster

    with dask_cluster(workers=2) as address:
        yield address
