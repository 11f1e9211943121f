"""Progress lines: on a terminal after the delay, erased at the end; silent in pipes and with --json."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
import time

from benchcert.flows.cli.progress import Progress

from conftest import SMALL_CSV, SMALL_MAP


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_shown_on_a_terminal_after_the_delay_and_erased():
    stream = _Tty()
    with Progress(stream=stream, delay=0.05, interval=0.02) as p:
        p.update("analysis 2/6: hierarchical")
        time.sleep(0.3)
    text = stream.getvalue()
    assert "analysis 2/6: hierarchical ... " in text and text.endswith("\r\033[K")


def test_quick_work_shows_nothing_and_pipes_never_do():
    stream = _Tty()
    with Progress(stream=stream, delay=5.0) as p:
        p.update("reading the store")
    assert stream.getvalue() == ""
    piped = io.StringIO()  # not a terminal
    with Progress(stream=piped, delay=0.0, interval=0.01) as p:
        p.update("x")
        time.sleep(0.1)
    assert piped.getvalue() == ""
    with Progress(enabled=False, stream=_Tty(), delay=0.0) as p:
        assert not p.enabled


def test_cli_on_a_terminal_is_silent_with_json(tmp_path):
    """A real pseudo-terminal: --json keeps stderr clean even when the work is slow enough to show progress."""
    maps = [a for m in SMALL_MAP for a in ("--map", m)]
    db = tmp_path / "s.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    r = subprocess.run([sys.executable, "-m", "benchcert.flows.cli", "ingest", str(SMALL_CSV), "--db", str(db),
                        "--benchmark", "b", *maps], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0
    main_fd, child_fd = pty.openpty()
    try:
        # The audit's stderr is a terminal; a slowed-down Progress (delay 0) would draw at once.
        code = ("import sys, benchcert.flows.cli.progress as p\n"
                "orig = p.Progress.__init__\n"
                "p.Progress.__init__ = lambda self, **k: orig(self, **{**k, 'delay': 0.0, 'interval': 0.01})\n"
                "from benchcert.flows.cli import main\n"
                "sys.exit(main(sys.argv[1:]))\n")
        for flag, shown in (("--json", False), (None, True)):
            argv = [sys.executable, "-c", code, "audit", "--db", str(db), "--benchmark", "b", "--artifacts",
                    str(tmp_path / "a")] + ([flag] if flag else [])
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=child_fd, env=env, timeout=120)
            assert proc.returncode == 0
            os.set_blocking(main_fd, False)
            try:
                err = os.read(main_fd, 1 << 16).decode()
            except BlockingIOError:
                err = ""
            if flag == "--json":
                json.loads(proc.stdout)
            assert ("\033[K" in err) == shown, err
    finally:
        os.close(main_fd)
        os.close(child_fd)


def test_ingest_reports_rows_read_to_the_progress_line(tmp_path):
    from benchcert.flows.bodies import ingest_body
    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.audit.steps import plain_steps

    class Seen:
        def __init__(self):
            self.texts = []

        def update(self, text):
            self.texts.append(text)

    seen = Seen()
    (report,) = ingest_body(plain_steps(), [str(SMALL_CSV)], str(tmp_path / "s.duckdb"), "b",
                            parse_mapping(SMALL_MAP), progress=seen)
    assert report.status == "ingested"
    assert seen.texts[0] == f"ingesting file 1/1: {SMALL_CSV.name}"
    assert f"ingesting file 1/1: {SMALL_CSV.name}: {report.rows_read:,} rows read" in seen.texts
