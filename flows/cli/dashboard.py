"""Sub-commands for operating benchcert: the dashboard (and, beside it, deployment commands).

``register(sub)`` is called by ``benchcert.flows.cli`` (COMMAND_MODULES); each group of
commands lives in its own ``register_<group>`` function so groups can be added without
touching each other.
"""

from __future__ import annotations

import ipaddress
import signal
import sys
import threading
from pathlib import Path

from benchcert.flows.cli.errors import EXIT_OK, print_json
from benchcert.flows.cli.options import command
from benchcert.tasks.errors import UsageError, UserError


def register(sub) -> None:
    register_dashboard(sub)


# --------------------------------------------------------------------------- dashboard


def cmd_dashboard_build(args) -> int:
    """Write the dashboard of --artifacts into --out (an existing --out must be empty or an earlier dashboard,
    which is updated in place, its unchanged run pages kept, unless --full builds it whole and swaps it in). Runs
    that cannot be read are listed as skipped; the rest is built."""
    from benchcert.tasks.render.dashboard import DEFAULT_METHODS, build_site

    methods = (args.method,) if args.method else DEFAULT_METHODS
    # An unusable --out (OutputFolderError, exit 2) or unreadable artifacts (DashboardError, 1) reach main().
    report = build_site(args.artifacts, args.out, methods=methods, max_trend_runs=args.max_runs,
                        stale_days=args.stale_days, full=args.full, processes=args.processes)
    index = report.out / "index.html"
    if args.json:
        print_json({"out": str(report.out), "index": str(index), "benchmarks": report.benchmarks,
                    "runs": report.runs, "runs_reused": report.reused, "pages": report.pages,
                    "problems": list(report.problems)})
    else:
        for p in report.problems:
            print(f"warning: skipped: {p}", file=sys.stderr)
        print(f"dashboard: {report.benchmarks} benchmark(s), {report.runs} run(s), {report.pages} page(s)"
              + (f"; {report.reused} run page(s) unchanged, taken over from the previous site" if report.reused else ""))
        print(f"open {index}  (or: benchcert dashboard serve --dir {report.out})")
    return EXIT_OK


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def cmd_dashboard_serve(args) -> int:
    """Serve the files of a built dashboard (and nothing outside it) until interrupted. Prints the URL once
    listening."""
    from benchcert.tasks.render.dashboard import make_server

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in 0..65535; got {args.port}")
    try:
        server = make_server(args.dir, args.host, args.port, quiet=args.quiet)  # no dashboard: DashboardError
    except OSError as exc:  # the address or port given cannot be used (taken, not this machine's)
        raise UserError(f"cannot listen on {args.host}:{args.port}: {exc}") from None
    if not _is_loopback(args.host):
        print(f"warning: {args.host} is not a loopback address: anyone who can reach it can read the dashboard",
              file=sys.stderr)
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    # Flushed at once: scripts (and the browser test) wait for this line to learn the port.
    if threading.current_thread() is threading.main_thread():
        # A service manager stops with SIGTERM: close the socket the same way as on Ctrl-C.
        signal.signal(signal.SIGTERM, _interrupt)
    print(f"serving {args.dir} at http://{shown}:{port}/  (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return EXIT_OK


def register_dashboard(sub) -> None:
    sp = sub.add_parser("dashboard", help="build or serve the static ops dashboard of an artifacts root",
                        description="A static, offline site from the run artifacts (never the live store): an "
                                    "index of benchmarks and runs, per benchmark the trend of each model's score "
                                    "with its interval across runs and checkpoints, per run its report.")
    dsub = sp.add_subparsers(dest="dashboard_command", required=True, metavar="ACTION")

    b = command(dsub, "build", cmd_dashboard_build, help="write the site from an artifacts root")
    b.add_argument("--artifacts", type=Path, required=True, metavar="DIR", help="artifacts root (holds index.json)")
    b.add_argument("--out", type=Path, required=True, metavar="DIR", help="site folder to write")
    b.add_argument("--method", default=None,
                   help="interval method to show (default: the first of headline (each score's headline interval, "
                        "labelled with its question), hierarchical, clustered_subject, wilson, iid_clt in each "
                        "benchmark's latest run)")
    b.add_argument("--max-runs", type=int, default=90, metavar="N", help="runs per trend chart (default 90)")
    b.add_argument("--stale-days", type=int, default=7, metavar="N",
                   help="the overview lists a benchmark as stale when its latest run is older than N days (default 7)")
    b.add_argument("--full", action="store_true",
                   help="render every page (default: a run unchanged since the site in --out was built keeps its "
                        "folder as it is)")
    b.add_argument("--processes", type=int, default=None, metavar="N",
                   help="a full or first build of 2,000 runs or more is shared among N forked processes (at most 4 "
                        "and the cores available; default 2, or 1 on one core; 1: one process): the same site and "
                        "about the same CPU seconds in less wall time")
    b.add_argument("--json", action="store_true", help="machine-readable output on stdout")

    s = command(dsub, "serve", cmd_dashboard_serve, help="serve a built site over HTTP (loopback by default)")
    s.add_argument("--dir", type=Path, required=True, metavar="DIR", help="site folder (from dashboard build)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    s.add_argument("--quiet", action="store_true", help="do not log requests")
