"""`benchcert serve` (the deployments) and `benchcert notify-checkpoint` (the trigger event)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from pathlib import Path

from benchcert.flows.cli.errors import EXIT_DATA, EXIT_OK, print_json, webhook_arg
from benchcert.flows.cli.options import command
from benchcert.tasks.errors import UsageError, UserError


class EventNotSentError(UserError):
    """notify-checkpoint could not send its event to the Prefect server (exit code 3: the server,
    like the store, is the service around the data that could not be used)."""

    exit_code = 3


def _processes(text: str) -> int:
    """--processes: a whole number of worker processes, at least 1."""
    import argparse

    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of processes, at least 1, got {text!r}")
    return int(text)


def cmd_serve(args) -> int:
    """Register and serve two deployments against PREFECT_API_URL: nightly-audit (cron schedule) and
    checkpoint-audit (event trigger). Runs until interrupted."""
    if not os.environ.get("PREFECT_API_URL"):
        raise UsageError("set PREFECT_API_URL to your Prefect server (or run `make serve`, which starts one "
                         "on 127.0.0.1)")
    webhook_arg(args.webhook)
    # The runner looks for due runs this often; short, so an event starts a run within seconds.
    os.environ.setdefault("PREFECT_RUNNER_POLL_FREQUENCY", str(args.poll))
    from prefect.exceptions import TerminationSignal
    from prefect.runner import Runner

    from benchcert.deployments.definitions import ServeOptions, build_deployments

    for folder in (args.inbox, args.artifacts):
        folder.mkdir(parents=True, exist_ok=True)
    deployments = build_deployments(ServeOptions(
        db=str(args.db), inbox=str(args.inbox), artifacts_root=str(args.artifacts), cron=args.cron,
        timezone=args.timezone, baseline=args.baseline, webhook_url=args.webhook, alpha=args.alpha,
        dashboard_dir=str(args.dashboard) if args.dashboard else None,
        allowed_logs=tuple(str(p) for p in args.allow_logs), dask_address=args.dask_address,
        dask_workers=args.dask_workers, processes=args.processes))
    runner = Runner(pause_on_shutdown=True)
    for deployment in deployments:
        runner.add_deployment(deployment)
    _stop_within(runner, SIGTERM_GRACE)
    print("Your deployments are being served and polling for scheduled runs!\n"
          + "".join(f"    {d.flow_name}/{d.name}\n" for d in deployments)
          + "Trigger one with `prefect deployment run NAME`; stop with Ctrl-C or SIGTERM.", flush=True)
    try:
        asyncio.run(runner.start())
    except (KeyboardInterrupt, TerminationSignal):  # a stop asked for, as prefect.serve takes it
        pass
    return EXIT_OK


#: Seconds Prefect's graceful stop gets after SIGTERM (it takes about 2 s with the API up).
SIGTERM_GRACE = 10.0


def _stop_within(runner, grace: float) -> None:
    """On SIGTERM, Prefect's graceful stop; the process ends at once if the API does not answer,
    and after ``grace`` seconds whatever the stop does.

    The graceful stop pauses the deployments' schedules through the API; once the API is gone
    its client retries each call with a back-off of a minute or more, and serve outlived SIGTERM
    (issue #39). A service manager's stop must end the process, so a watcher thread ends it.
    """
    prefect_stop = runner.handle_sigterm
    api = os.environ.get("PREFECT_API_URL", "")

    def watch() -> None:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not _answers(api):
                why = f"the Prefect API at {api} does not answer"
                break
            time.sleep(0.5)
        else:
            why = f"not stopped {grace:g} s after it"
        print(f"benchcert serve: SIGTERM: {why}; exiting without pausing the deployments' schedules",
              file=sys.stderr, flush=True)
        os._exit(EXIT_DATA)  # as for an unreachable API at any other time

    def on_sigterm(*args, **kwargs):
        threading.Thread(target=watch, name="sigterm-watch", daemon=True).start()
        prefect_stop(*args, **kwargs)

    # Runner.start installs self.handle_sigterm as the SIGTERM handler: the instance's is this one.
    runner.handle_sigterm = on_sigterm


def _answers(api: str) -> bool:
    """Whether anything answers HTTP at the API's address (any status counts: it is there; a slow
    answer is taken for one, so a busy server still gets its schedules paused)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{api.rstrip('/')}/health", timeout=1):
            return True
    except urllib.error.HTTPError:
        return True
    except urllib.error.URLError as exc:
        return isinstance(exc.reason, TimeoutError)
    except TimeoutError:
        return True
    except (OSError, ValueError):
        return False


def register(sub) -> None:
    sp = command(sub, "serve", cmd_serve, help="serve the nightly and checkpoint deployments on a Prefect server")
    sp.add_argument("--db", type=Path, required=True, help="DuckDB store file")
    sp.add_argument("--inbox", type=Path, required=True, help="inbox folder: one subfolder per benchmark")
    sp.add_argument("--artifacts", type=Path, required=True, metavar="DIR", help="artifacts root")
    sp.add_argument("--cron", default="0 2 * * *", help="nightly schedule (default '0 2 * * *')")
    sp.add_argument("--timezone", default="UTC", help="time zone of the schedule (default UTC)")
    sp.add_argument("--baseline", help="baseline model for checkpoint verdicts")
    sp.add_argument("--webhook", help="URL that gets a JSON POST when a run finds regressions")
    sp.add_argument("--alpha", type=float, default=0.05)
    sp.add_argument("--dashboard", type=Path, metavar="DIR",
                    help="rebuild the static dashboard here after every run (serve it with benchcert dashboard serve)")
    sp.add_argument("--allow-logs", action="append", default=[], type=Path, metavar="DIR",
                    help="a folder outside the inbox that checkpoint events may name as their logs (repeatable); "
                         "any other path is refused")
    sp.add_argument("--poll", type=float, default=2.0, help="seconds between polls for due runs (default 2)")
    sp.add_argument("--dask-address", metavar="URL",
                    help="nightly: audit the changed benchmarks in parallel on this Dask scheduler (tcp://HOST:PORT)")
    sp.add_argument("--dask-workers", type=int, metavar="N",
                    help="nightly: audit the changed benchmarks in parallel on a local Dask cluster of N processes")
    sp.add_argument("--processes", type=_processes, metavar="N",
                    help="nightly: ingest and audit the benchmarks on N worker processes, N at a time "
                         "(without Dask; default: one after another in the flow's process)")

    sp = command(sub, "notify-checkpoint", cmd_notify, help="emit the event that starts a checkpoint audit")
    sp.add_argument("--model", required=True, help='model id, e.g. "org/model@step-12000"')
    which = sp.add_mutually_exclusive_group(required=True)
    which.add_argument("--benchmark", help="the benchmark the logs belong to")
    which.add_argument("--suite", metavar="NAME",
                       help="a suite stored with `benchcert suite define`: --logs is a folder with one sub-folder or "
                            "file per benchmark (DIR/<benchmark>/ or DIR/<benchmark>.<ext>); one flow run ingests and "
                            "audits them all, records one suite verdict and sends one webhook")
    sp.add_argument("--logs", required=True, help="log file or folder, as the serving machine sees it")
    sp.add_argument("--question", choices=("items", "new-subjects"), default="items",
                    help="what the checkpoint verdict answers: items (default; the item-weighted gap, subjects "
                         "fixed strata) or new-subjects (the subject-weighted gap); see benchcert compare --help")
    sp.add_argument("--json", action="store_true")


def cmd_notify(args) -> int:
    """Send 'benchcert.checkpoint.logged' to the Prefect server at PREFECT_API_URL (resource id = the model
    id; payload = benchmark and log location)."""
    if not os.environ.get("PREFECT_API_URL"):
        raise UsageError("set PREFECT_API_URL to the Prefect server that serves benchcert")
    import asyncio

    from prefect.events import Event
    from prefect.events.clients import get_events_client

    from benchcert.flows.checkpoint import CHECKPOINT_EVENT

    event = Event(event=CHECKPOINT_EVENT, resource={"prefect.resource.id": args.model,
                                                    "prefect.resource.name": args.model},
                  payload={"benchmark": args.benchmark or "", "logs": str(args.logs), "question": args.question,
                           **({"suite": args.suite} if args.suite else {})})

    async def emit() -> None:
        async with get_events_client() as client:
            await client.emit(event)

    try:
        asyncio.run(emit())
    except Exception as exc:  # network and server errors: say what failed, exit non-zero
        raise EventNotSentError(f"could not send the event: {exc}") from exc
    if args.json:
        print_json({"event": CHECKPOINT_EVENT, "id": str(event.id), "model": args.model,
                    "benchmark": args.benchmark, "suite": args.suite, "logs": str(args.logs),
                    "question": args.question}, indent=None)
    else:
        what = args.benchmark if args.suite is None else f"suite {args.suite}"
        print(f"sent {CHECKPOINT_EVENT} for {args.model} ({what}, {args.logs}); event id {event.id}")
    return EXIT_OK
