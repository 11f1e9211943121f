"""The meters the benchmark scripts share: CPU seconds, the load average, peak memory, and the
hidden ``--child`` mode by which a script measures one case in a fresh copy of itself.

Not a benchmark: ``make bench-all`` runs it like the others and it prints nothing. The scripts
import it as ``from _meters import ...`` (Python puts a script's own folder first on sys.path).
"""

from __future__ import annotations

import argparse
import os
import resource


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (all its threads; not its children)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far (``ru_maxrss``, which Linux gives in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def load_line(load: tuple[float, float, float] | None = None) -> str:
    """``load average 1.02 0.87 0.75 on 2 CPUs`` (``load`` as os.getloadavg() gives it, else read now):
    printed beside every figure, as the machine is shared."""
    load = os.getloadavg() if load is None else load
    return f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"


def parse_or_run_child(ap: argparse.ArgumentParser, child) -> argparse.Namespace | None:
    """Parse the script's arguments, or, given the hidden ``--child A B``, run ``child(A, B)`` and return None.

    The parent re-runs the script with ``--child`` so that each case's memory and CPU are a fresh
    process's own.
    """
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return None
    return args
