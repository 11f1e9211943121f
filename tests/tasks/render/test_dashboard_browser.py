"""The dashboard in a real browser: headless Chromium (Debian's ``chromium`` package) loads the
index, a benchmark page and a run page from ``benchcert dashboard serve`` and must see the
expected models and numbers, no console error, no request leaving the server, and a model
named ``<script>...`` shown as text.  Screenshots go to $BENCHCERT_TEST_ARTIFACTS (default
tests/artifacts/).

Chromium is driven over the DevTools protocol with a stdlib WebSocket client (no extra
dependency).  The artifacts come from the audit's own functions (store -> matrices ->
analyses -> summary/report -> stage and publish the run directory), i.e. a real audit minus the Prefect wrapper.
Reference numbers are read back from each run's summary.json.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import selectors
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from benchcert.tasks.render.dashboard import DEFAULT_METHODS, build_site

from conftest import ROOT, SMALL_CSV, SMALL_MAP
from run_support import stage_and_publish

CHROMIUM = os.environ.get("BENCHCERT_CHROMIUM", "/usr/bin/chromium")
EVIL_MODEL = '<script>console.error("xss")</script>'
SMALL_ENVIRONMENTS = {"source": "envs.toml", "level": "domain",
                      "environments": {"lab": {"stem": 0.6, "humanities": 0.4}, "library": {"humanities": 1.0}},
                      "family_name": "any", "family_kind": "simplex",
                      "family_vertices": {"any:stem": {"stem": 1.0}, "any:humanities": {"humanities": 1.0}}}
TIMEOUT = 90.0  # seconds; the 2-core test machine is shared, Chromium's first start can be slow


# --------------------------------------------------------------------------- DevTools client


class DevTools:
    """Just enough of the Chrome DevTools Protocol over a stdlib WebSocket (RFC 6455) client."""

    def __init__(self, url: str, timeout: float = TIMEOUT):
        u = urlsplit(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self._recv()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"DevTools refused the WebSocket upgrade: {head[:200]!r}")
        self.next_id = 0
        self.events: list[dict] = []

    def _recv(self) -> bytes:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("DevTools connection closed")
        return chunk

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            self.buf += self._recv()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _send(self, payload: bytes, opcode: int = 0x1) -> None:
        n = len(payload)
        head = bytes([0x80 | opcode]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big")
                                         if n < 1 << 16 else bytes([0x80 | 127]) + n.to_bytes(8, "big"))
        mask = os.urandom(4)  # clients must mask every frame
        self.sock.sendall(head + mask + bytes(b ^ mask[i & 3] for i, b in enumerate(payload)))

    def _message(self) -> dict:
        data = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(self._read(2), "big")
            elif n == 127:
                n = int.from_bytes(self._read(8), "big")
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the connection")
            if opcode == 0x9:
                self._send(payload, 0xA)
                continue
            if opcode == 0xA:
                continue
            data += payload
            if b0 & 0x80:
                return json.loads(data)

    def call(self, method: str, session: str | None = None, **params) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        self._send(json.dumps(msg).encode())
        while True:
            m = self._message()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def wait_for(self, method: str, session: str, start: int, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not any(e["method"] == method and e.get("sessionId") == session for e in self.events[start:]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} within {timeout} s")
            self.events.append(self._message())


class Tab:
    """One page target: navigate, evaluate, screenshot, and what went wrong while loading."""

    def __init__(self, cdp: DevTools, base: str):
        self.cdp, self.base = cdp, base
        target = cdp.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = cdp.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            cdp.call(f"{domain}.enable", self.session)
        cdp.call("Emulation.setDeviceMetricsOverride", self.session, width=1280, height=900, deviceScaleFactor=1,
                 mobile=False)

    def open(self, path: str) -> tuple[list[str], list[str]]:
        """Load base + path; returns (console errors and warnings, URLs requested outside the server)."""
        start = len(self.cdp.events)
        nav = self.cdp.call("Page.navigate", self.session, url=self.base + path)
        assert not nav.get("errorText"), nav
        self.cdp.wait_for("Page.loadEventFired", self.session, start)
        return self.collect(start)

    def collect(self, start: int) -> tuple[list[str], list[str]]:
        """Console errors/warnings and foreign requests among the events since index ``start``."""
        problems, foreign = [], []
        for e in self.cdp.events[start:]:
            if e.get("sessionId") != self.session:
                continue
            p = e.get("params", {})
            if e["method"] == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert", "warning"):
                problems.append(f"console.{p['type']}: " + " ".join(str(a.get("value", a.get("description")))
                                                                      for a in p.get("args", [])))
            elif e["method"] == "Runtime.exceptionThrown":
                problems.append(f"exception: {p['exceptionDetails'].get('text')}")
            elif e["method"] == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                problems.append(f"{p['entry']['source']} {p['entry']['level']}: {p['entry']['text']}")
            elif e["method"] == "Network.requestWillBeSent":
                url = p["request"]["url"]
                if not url.startswith((self.base, "data:", "about:")):
                    foreign.append(url)
        return problems, foreign

    def js(self, expression: str):
        r = self.cdp.call("Runtime.evaluate", self.session, expression=expression, returnByValue=True)
        assert "exceptionDetails" not in r, r["exceptionDetails"]
        return r["result"].get("value")

    def screenshot(self, path: Path) -> None:
        height = self.cdp.call("Page.getLayoutMetrics", self.session)["cssContentSize"]["height"]
        shot = self.cdp.call("Page.captureScreenshot", self.session, format="png", captureBeyondViewport=True,
                             clip={"x": 0, "y": 0, "width": 1280, "height": min(height, 6000), "scale": 1})
        path.write_bytes(base64.b64decode(shot["data"]))


# --------------------------------------------------------------------------- fixtures


def _audit(db: Path, benchmark: str, arts: Path, environments: dict | None = None) -> Path:
    """The audit flow's steps without Prefect (see flows/audit.py), writing one run directory."""
    import datetime as dt

    from benchcert.tasks.artifacts import runs as artifacts

    from benchcert.tasks.audit import results

    from benchcert.tasks.store import connection as store
    from benchcert.tasks.audit.analyses import ANALYSES, run_analysis
    from benchcert.tasks.audit.contract import AuditConfig
    from benchcert.tasks.store.matrices import load_matrices, source_refs

    with store.open_store(db, write=False) as con:
        m = load_matrices(con, benchmark)
        sources = source_refs(con, benchmark)
    config = AuditConfig(environments=environments)
    outputs = [run_analysis(name, fn, m, config) for name, fn in ANALYSES.items()]
    now = dt.datetime.now(dt.timezone.utc)
    run_id = artifacts.new_run_id(now)
    summary = results.build_summary(run_id=run_id, created_at=artifacts.iso(now), matrices=m, config=config,
                                    outputs=outputs)
    fields = {"benchcert_version": "test", "run_id": run_id, "flow_run_id": None, "benchmark": benchmark,
              "status": "completed", "started_at": artifacts.iso(now), "finished_at": artifacts.iso(now),
              "config": {}, "sources": sources.to_dicts(), "timings_s": {}}
    return stage_and_publish(arts, summary=summary, manifest_fields=fields, tables=results.collect_tables(outputs),
                             report_html=results.build_report(summary, outputs, sources=sources))


def _chromium() -> str:
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else None
    if path is None and "BENCHCERT_CHROMIUM" not in os.environ:
        path = shutil.which("chromium")
    if not path:
        pytest.fail(f"headless Chromium is required for the dashboard browser test and {CHROMIUM} is missing: "
                    "install Debian's package (sudo apt-get install -y chromium; .ci/run does this) or point "
                    "BENCHCERT_CHROMIUM at a Chromium binary", pytrace=False)
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.ingest.mapping import parse_mapping

    tmp = tmp_path_factory.mktemp("browser")
    db, arts = tmp / "store.duckdb", tmp / "artifacts"
    mapping = parse_mapping(SMALL_MAP)
    rows = [line.split(",") for line in SMALL_CSV.read_text().splitlines()[1:] if line.startswith("m1,")]
    evil = tmp / "evil.csv"
    quoted = '"' + EVIL_MODEL.replace('"', '""') + '"'
    evil.write_text("model,question,topic,area,correct\n"
                    + "".join(f"{quoted},{q},{t},{a},{i % 2}\n" for i, (_, q, t, a, _c) in enumerate(rows))
                    + "".join(f"org/m@step-{s},{q},{t},{a},{(i + k) % 2}\n" for k, s in enumerate((2000, 12000))
                              for i, (_, q, t, a, _c) in enumerate(rows)))
    later = tmp / "later.csv"
    later.write_text("model,question,topic,area,correct\n"
                     + "".join(f"org/m@step-30000,{q},{t},{a},1\n" for _, q, t, a, _c in rows))
    for f in (SMALL_CSV, evil):
        assert ingest_file(db, f, benchmark="small", mapping=mapping).status == "ingested"
    _audit(db, "small", arts)
    time.sleep(0.01)  # distinct finished_at for the second run
    assert ingest_file(db, later, benchmark="small", mapping=mapping).status == "ingested"
    _audit(db, "small", arts, environments=SMALL_ENVIRONMENTS)  # the latest run has the environments section
    out = tmp / "site"
    build_site(arts, out)
    # A page that breaks every rule, to prove this harness notices (negative control).
    (out / "control.html").write_text('<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
                                      '<script>console.error("control")</script>'
                                      '<img src="http://192.0.2.1/x.png" alt=""></body></html>')
    return out


@pytest.fixture(scope="module")
def server(site):
    exe = Path(sys.executable).with_name("benchcert")
    cmd = [str(exe)] if exe.is_file() else [sys.executable, "-m", "benchcert.flows.cli"]
    proc = subprocess.Popen([*cmd, "dashboard", "serve", "--dir", str(site), "--port", "0", "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(TIMEOUT):
            raise TimeoutError("benchcert dashboard serve printed nothing")
        line = proc.stdout.readline()
        assert line.startswith("serving "), (line, proc.stderr.read() if proc.poll() is not None else "")
        base = line.split(" at ", 1)[1].split()[0]
        assert base.startswith("http://127.0.0.1:")
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def chromium() -> str:
    return _chromium()


@contextlib.contextmanager
def devtools(exe: str, profile: Path):
    """A headless Chromium with its DevTools client, closed on exit (also used by tests/tasks/judge)."""
    proc = subprocess.Popen([exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                             "--disable-component-update", "--disable-sync", "--no-first-run",
                             f"--user-data-dir={profile}", "--remote-debugging-port=0",
                             "--remote-debugging-address=127.0.0.1", "--hide-scrollbars", "--mute-audio",
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + TIMEOUT
        while not (port_file.is_file() and len(port_file.read_text().splitlines()) >= 2):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{exe} did not open its DevTools port (exit code {proc.poll()})", pytrace=False)
            time.sleep(0.1)
        port, path = port_file.read_text().splitlines()[:2]
        cdp = DevTools(f"ws://127.0.0.1:{port}{path}")
        yield cdp
        try:
            cdp.call("Browser.close")
        except (ConnectionError, OSError):
            pass
    finally:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def tab(chromium, server, tmp_path_factory):  # chromium first: a missing browser fails before any setup
    with devtools(chromium, tmp_path_factory.mktemp("chromium-profile")) as cdp:
        yield Tab(cdp, server)


@pytest.fixture(scope="module")
def shots() -> Path:
    d = Path(os.environ.get("BENCHCERT_TEST_ARTIFACTS") or ROOT / "tests" / "artifacts")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _latest(site: Path) -> tuple[str, dict]:
    index = json.loads((site.parent / "artifacts" / "index.json").read_text())
    run_id = index["benchmarks"][0]["latest_run_id"]
    return run_id, json.loads((site / "small" / run_id / "summary.json").read_text())


MODEL_ROWS_JS = """Array.from(document.querySelectorAll('table.models tbody tr')).map(tr => ({
  model: tr.querySelector('td.model').textContent, macro: tr.querySelector('td.macro').textContent,
  macroIv: tr.querySelector('td.macro-iv').textContent, pooled: tr.querySelector('td.pooled').textContent,
  pooledIv: tr.querySelector('td.pooled-iv').textContent}))"""


def _expected_rows(summary: dict) -> list[dict]:
    # the dashboard draws each score's headline interval (summary 1.2), else the first method present
    present = {i["method"] for m in summary["models"] for i in m["macro"]["intervals"]} | {"headline"}
    method = next(m for m in DEFAULT_METHODS if m in present)
    def interval(score: dict) -> str:
        i = ({i["method"]: i for i in score["intervals"]} | {"headline": score.get("headline")}).get(method)
        return "\u2014" if i is None else f"[{100 * i['lower']:.2f}, {100 * i['upper']:.2f}]"

    return [{"model": m["model"], "macro": f"{100 * m['macro']['estimate']:.2f}%", "macroIv": interval(m["macro"]),
             "pooled": f"{100 * m['pooled']['estimate']:.2f}%", "pooledIv": interval(m["pooled"])}
            for m in sorted(summary["models"], key=lambda m: (-m["pooled"]["estimate"], m["model"]))]


# --------------------------------------------------------------------------- tests


def test_harness_notices_console_errors_and_foreign_requests(tab):
    """Negative control: a page with an unescaped script and a remote image must be caught."""
    problems, foreign = tab.open("control.html")
    # The server's CSP header blocks both, and the browser reports each violation as an error.
    assert any("inline script" in p and "Content Security Policy" in p for p in problems), problems
    assert foreign == ["http://192.0.2.1/x.png"]
    start = len(tab.cdp.events)
    tab.js('console.error("probe")')
    tab.js("1")  # events arrive in order: after this reply the console event has been read
    assert tab.collect(start)[0] == ["console.error: probe"]


def test_index_page(tab, site, shots):
    problems, foreign = tab.open("index.html")
    tab.screenshot(shots / "dashboard-index.png")
    assert problems == [] and foreign == []
    run_id, summary = _latest(site)
    text = tab.js("document.body.innerText")
    assert "small" in text and run_id in text
    assert tab.js("document.querySelectorAll('script').length") == 0
    # the overview's benchmark row: the leading model by the headline's pooled score, with its interval
    best = _expected_rows(summary)[0]
    assert tab.js("[document.querySelector('table.benchmarks td.leader').textContent, "
                  "document.querySelector('table.benchmarks td.pooled-iv').textContent]") == [best["model"],
                                                                                           best["pooledIv"]]
    problems, foreign = tab.open("_views/models.html")  # every model, the one named like markup shown as text
    assert problems == [] and foreign == [] and EVIL_MODEL in tab.js("document.body.innerText")


def test_benchmark_page_trends(tab, site, shots):
    problems, foreign = tab.open("small/index.html")
    tab.screenshot(shots / "dashboard-benchmark.png")
    assert problems == [] and foreign == []
    # Checkpoints in natural order, each from the latest run that has it.
    ck = tab.js("Array.from(document.querySelectorAll('#checkpoints ~ section.family table.values')[0]"
                ".querySelectorAll('td.model')).map(td => td.textContent)")
    assert ck == ["org/m@step-2000", "org/m@step-12000", "org/m@step-30000"]
    assert tab.js("document.querySelectorAll('svg.trend').length") >= 1 + 5  # checkpoint chart + one per model
    _, summary = _latest(site)
    shown = tab.js("Array.from(document.querySelectorAll('svg.trend g.pt')).map(g => Number(g.dataset.estimate))")
    for m in summary["models"]:
        assert m["macro"]["estimate"] in shown and m["pooled"]["estimate"] in shown


def test_run_page_shows_models_numbers_and_the_report(tab, site, shots):
    run_id, summary = _latest(site)
    problems, foreign = tab.open(f"small/{run_id}/index.html")
    tab.screenshot(shots / "dashboard-run.png")
    assert problems == [] and foreign == []
    assert tab.js(MODEL_ROWS_JS) == _expected_rows(summary)
    assert EVIL_MODEL in [r["model"] for r in tab.js(MODEL_ROWS_JS)]  # the model name is text, not markup
    assert tab.js("document.querySelectorAll('script').length") == 0
    frame = tab.js("(() => { const d = document.querySelector('iframe.report').contentDocument; return "
                   "{title: d.title, scripts: d.querySelectorAll('script').length, text: d.body.innerText}; })()")
    assert frame["title"] == "benchcert audit: small" and frame["scripts"] == 0
    assert EVIL_MODEL in frame["text"]


def test_run_report_environment_section_renders(tab, site, shots):
    # audit --environments: the report's section with each model's profile across environments
    # (an inline-SVG interval per model and environment), the failure-rate table and the
    # black-box sentence (certifying-capabilities paper, Theorem 3.10).
    run_id, summary = _latest(site)
    problems, foreign = tab.open(f"small/{run_id}/index.html")
    assert problems == [] and foreign == []
    sec = tab.js("""(() => { const d = document.querySelector('iframe.report').contentDocument;
      const s = d.querySelector('section#environments'); if (!s) return null;
      s.scrollIntoView(); const svg = s.querySelector('.environment-profiles svg');
      const box = svg ? svg.getBoundingClientRect() : null;
      return {title: s.querySelector('h2').textContent, intervals: svg ? svg.querySelectorAll('g.interval').length : 0,
              width: box ? box.width : 0, height: box ? box.height : 0, text: s.innerText,
              rows: s.querySelectorAll('table tbody tr').length}; })()""")
    tab.screenshot(shots / "report-environments.png")
    assert sec is not None and sec["title"] == "Deployment environments and failure rates"
    n_models = len(summary["models"])
    # lab, library, any:stem, any:humanities and the family's worst mix, for every model
    assert sec["intervals"] == 5 * n_models
    assert sec["width"] > 300 and sec["height"] > 100
    assert "cannot be certified by black-box testing" in sec["text"]
    assert "any (worst mix)" in sec["text"] and EVIL_MODEL in sec["text"]
    assert sec["rows"] == 5 * n_models + n_models   # environment_risks rows + failure-rate rows
