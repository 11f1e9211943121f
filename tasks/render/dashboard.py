"""The ops dashboard: a static, offline site built from run artifacts, and a loopback server.

It reads only the artifact contract (``<root>/index.json`` and each run's ``manifest.json``,
``summary.json`` and ``report.html``), never the live DuckDB store, so it can be rebuilt
while audits are writing and on any machine that can read the artifacts.

Site layout (every folder name is :func:`~benchcert.tasks.audit.artifacts.safe_component` of a
name from the artifacts, so nothing a log says can leave the site folder)::

    <out>/index.html                           benchmarks and their runs, newest first
    <out>/<benchmark>/index.html               trends: each model's macro and pooled score with
                                               its interval across runs, and across the
                                               checkpoints of a model family
    <out>/<benchmark>/<run id>/index.html      one run: models, changes, verdicts, warnings, sources
    <out>/<benchmark>/<run id>/report.html     the run's own report (copied), embedded in a frame
    <out>/<benchmark>/<run id>/{summary,manifest}.json  copies, for download

Safety rules:

* every string that comes from an artifact (model, benchmark, subject names, warnings, paths,
  run ids) is escaped with :func:`html.escape`; markup built here is wrapped in :class:`_Html`
  so a table cell is either known-safe markup or escaped text, never "probably fine";
* no script, no external URL, no web font: each page carries a Content-Security-Policy meta
  tag (:data:`SITE_CSP`) that forbids every fetch except same-origin frames (the embedded
  report, itself sandboxed without scripts), and :func:`serve` sends the same policy as a header;
* the site is assembled in a hidden sibling folder and swapped into place under a lock, and an
  existing ``--out`` folder is only replaced if an earlier build marked it as a dashboard.

A checkpoint is a model id with an ``@``: ``"org/model@step-12000"`` is checkpoint
``"step-12000"`` of family ``"org/model"`` (:func:`split_checkpoint`).  Checkpoints are
ordered naturally (``step-2000`` before ``step-12000``).
"""

from __future__ import annotations

import datetime as dt
import html
import json
import math
import os
import re
import shutil
import threading
import uuid
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import polars as pl
from filelock import FileLock

from benchcert.tasks.audit.artifacts import inside, iso, safe_component
from benchcert.tasks.render.report import interval_plot_svg

__all__ = [
    "DEFAULT_METHODS",
    "SITE_CSP",
    "DashboardError",
    "OutputFolderError",
    "ModelScore",
    "RunRecord",
    "SiteReport",
    "split_checkpoint",
    "checkpoint_key",
    "load_runs",
    "choose_method",
    "trend_table",
    "checkpoint_table",
    "trend_svg",
    "build_site",
    "make_server",
]

#: Interval shown per score, most defensible first; the first one present in a benchmark's latest
#: run is used on all of that benchmark's pages (same order as the run-change detector).
DEFAULT_METHODS = ("hierarchical", "clustered_subject", "wilson", "iid_clt")

#: Same-origin frames are the only fetch a page may make (the embedded report.html).
SITE_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-src 'self'; "
            "base-uri 'none'; form-action 'none'")

#: File that marks a folder as built by :func:`build_site` (so a rebuild may replace it).
MARKER = ".benchcert-dashboard"

METRICS = ("macro", "pooled")
_COLORS = {"macro": "#0072b2", "pooled": "#d55e00"}
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff"
                          "\u202a-\u202e\u2066-\u2069]")  # and bidi controls, which could reorder names
_MINUS = "\u2212"
_DASH = "\u2014"


class DashboardError(RuntimeError):
    """The artifacts cannot be read as a whole, or the output folder cannot be used."""


class OutputFolderError(DashboardError):
    """The --out folder cannot be used (not a dashboard, or inside the artifacts root)."""


class _Html(str):
    """Markup built here from escaped parts; inserted verbatim, everything else is escaped."""


def _esc(value) -> str:
    # Characters illegal in XML are replaced so inline SVG stays well-formed.
    s = "" if value is None else str(value)
    return html.escape(_XML_ILLEGAL.sub("\ufffd", s), quote=True)


def _h(value) -> str:
    return value if isinstance(value, _Html) else _esc(value)


def _link(href: str, text) -> _Html:
    return _Html(f'<a href="{_esc(href)}">{_h(text)}</a>')


def _pct(x: float | None) -> str:
    return _DASH if x is None or not math.isfinite(x) else f"{100 * x:.2f}%"


def _iv(lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return _DASH
    return f"[{100 * lo:.2f}, {100 * hi:.2f}]"


# --------------------------------------------------------------------------- model ids


def split_checkpoint(model: str) -> tuple[str, str | None]:
    """``"org/model@step-12000"`` -> ``("org/model", "step-12000")``; no ``@`` -> ``(model, None)``.

    The last ``@`` separates family and checkpoint, and both sides must be non-empty, so ids
    like ``"@x"`` or ``"x@"`` are families of their own.
    """
    family, sep, ckpt = model.rpartition("@")
    if not sep or not family or not ckpt:
        return model, None
    return family, ckpt


def checkpoint_key(label: str | None) -> tuple:
    """Natural sort key: digit runs compare as numbers (``step-2000`` < ``step-12000``);
    the family's own id (``None``) sorts first."""
    if label is None:
        return (0, ())
    parts = re.split(r"(\d+)", label)
    return (1, tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts if p))


# --------------------------------------------------------------------------- reading artifacts


@dataclass(frozen=True)
class ModelScore:
    """One model's headline in one run: estimates and every interval, keyed (metric, method)."""

    model: str
    n_items: int
    coverage: float
    estimates: dict[str, float]
    intervals: dict[tuple[str, str], tuple[float, float]]

    @property
    def family(self) -> str:
        return split_checkpoint(self.model)[0]

    @property
    def checkpoint(self) -> str | None:
        return split_checkpoint(self.model)[1]


@dataclass(frozen=True)
class RunRecord:
    """What the dashboard needs from one run directory (manifest.json + summary.json)."""

    benchmark: str
    run_id: str
    run_dir: Path
    started_at: str
    finished_at: str
    flow_run_id: str | None
    alpha: float
    variant: str
    n_items: int
    n_models: int
    n_subjects: int
    n_domains: int
    models: tuple[ModelScore, ...]
    warnings: tuple[str, ...]
    verdicts: tuple[dict, ...]
    changes: dict | None
    sources: tuple[dict, ...]
    tables: tuple[dict, ...]

    @property
    def regressions(self) -> list[str]:
        listed = set((self.changes or {}).get("regressions") or [])
        return sorted(listed | {str(v.get("model")) for v in self.verdicts if v.get("verdict") == "regressed"})


class _Skip(ValueError):
    """One run directory that cannot be shown; the rest of the site is still built."""


def _need(d, key: str, kind, where: str):
    if not isinstance(d, dict) or key not in d:
        raise _Skip(f"{where}: missing {key!r}")
    v = d[key]
    if kind is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise _Skip(f"{where}: {key!r} is not a finite number: {v!r}")
        return float(v)
    if kind is int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise _Skip(f"{where}: {key!r} is not an integer: {v!r}")
        return v
    if not isinstance(v, kind):
        raise _Skip(f"{where}: {key!r} is not {kind.__name__}: {v!r}")
    return v


def _read_json(path: Path, root: Path) -> dict:
    try:
        real = inside(root, str(path.relative_to(root)))  # a symlink out of the root is not read
    except ValueError as exc:
        raise _Skip(str(exc)) from None
    try:
        data = json.loads(real.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _Skip(f"{path}: unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise _Skip(f"{path}: not a JSON object")
    return data


def _parse_model(m, where: str) -> ModelScore:
    name = _need(m, "model", str, where)
    where = f"{where}, model {name!r}"
    estimates, intervals = {}, {}
    for metric in METRICS:
        score = _need(m, metric, dict, where)
        estimates[metric] = _need(score, "estimate", float, f"{where} {metric}")
        for iv in score.get("intervals") or []:
            method = _need(iv, "method", str, f"{where} {metric}")
            intervals[(metric, method)] = (_need(iv, "lower", float, f"{where} {metric} {method}"),
                                           _need(iv, "upper", float, f"{where} {metric} {method}"))
    return ModelScore(model=name, n_items=_need(m, "n_items", int, where),
                      coverage=_need(m, "coverage", float, where), estimates=estimates, intervals=intervals)


def _parse_run(root: Path, run_dir: Path, benchmark: str, run_id: str) -> RunRecord:
    manifest = _read_json(run_dir / "manifest.json", root)
    summary = _read_json(run_dir / "summary.json", root)
    where = str(run_dir / "summary.json")
    for name, doc in (("manifest", manifest), ("summary", summary)):
        if doc.get("run_id") != run_id or doc.get("benchmark") != benchmark:
            raise _Skip(f"{run_dir}: {name} names run {doc.get('run_id')!r} of {doc.get('benchmark')!r}, "
                        f"but index.json lists run {run_id!r} of {benchmark!r}")
    models = tuple(_parse_model(m, where) for m in _need(summary, "models", list, where))
    changes = summary.get("changes")
    return RunRecord(
        benchmark=benchmark, run_id=run_id, run_dir=run_dir,
        started_at=str(manifest.get("started_at", "")),
        finished_at=_need(manifest, "finished_at", str, str(run_dir / "manifest.json")),
        flow_run_id=manifest.get("flow_run_id") if isinstance(manifest.get("flow_run_id"), str) else None,
        alpha=_need(summary, "alpha", float, where), variant=str(summary.get("variant", "")),
        n_items=_need(summary, "n_items", int, where), n_models=_need(summary, "n_models", int, where),
        n_subjects=_need(summary, "n_subjects", int, where), n_domains=_need(summary, "n_domains", int, where),
        models=models,
        warnings=tuple(str(w) for w in summary.get("warnings") or []),
        verdicts=tuple(v for v in summary.get("verdicts") or [] if isinstance(v, dict)),
        changes=changes if isinstance(changes, dict) else None,
        sources=tuple(s for s in manifest.get("sources") or [] if isinstance(s, dict)),
        tables=tuple(t for t in manifest.get("tables") or [] if isinstance(t, dict)),
    )


def load_runs(artifacts_root: str | os.PathLike) -> tuple[list[RunRecord], list[str]]:
    """Every completed run listed in ``<root>/index.json``, oldest first per benchmark.

    Returns the runs and a list of problems (a run folder that is missing, unreadable, outside
    the root or inconsistent with index.json is skipped and named there, never fatal).

    Raises
    ------
    DashboardError
        When ``root`` has no readable index.json (it is not an artifacts root).
    """
    root = Path(artifacts_root).resolve()
    index_path = root / "index.json"
    # A root that holds run directories gets its index rebuilt from them when the index is
    # missing or damaged; a folder without any is not an artifacts root.
    has_runs = root.is_dir() and any(root.glob("*/*/manifest.json"))
    try:
        index = json.loads(index_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if not has_runs:
            raise DashboardError(f"{index_path}: no such file; is {root} an artifacts root "
                                 f"(benchcert audit --artifacts DIR)?") from None
        index = None
    except (OSError, ValueError) as exc:
        if not has_runs:
            raise DashboardError(f"{index_path}: unreadable ({exc})") from None
        index = None
    entries = index.get("benchmarks") if isinstance(index, dict) else None
    if not isinstance(entries, list) and has_runs:
        from benchcert.tasks.audit.artifacts import read_index

        entries = read_index(root)["benchmarks"]
    if not isinstance(entries, list):
        raise DashboardError(f"{index_path}: no 'benchmarks' list; not a benchcert index")
    runs, problems, seen = [], [], set()
    for entry in entries:
        try:
            benchmark = _need(entry, "benchmark", str, str(index_path))
            folder = _need(entry, "dir", str, str(index_path))
            # index.json is data too: its folder must be a plain child of the root.
            if folder != safe_component(benchmark):
                raise _Skip(f"{index_path}: benchmark {benchmark!r} has an unsafe folder {folder!r} (its own "
                            f"is {safe_component(benchmark)!r})")
            bench_dir = inside(root, folder)
            run_ids = _need(entry, "runs", list, str(index_path))
        except (_Skip, ValueError) as exc:
            problems.append(str(exc))
            continue
        for run_id in run_ids:
            try:
                if not isinstance(run_id, str) or not run_id:
                    raise _Skip(f"{index_path}: bad run id {run_id!r} for benchmark {benchmark!r}")
                if (benchmark, safe_component(run_id)) in seen:
                    raise _Skip(f"{index_path}: run {run_id!r} of {benchmark!r} is listed twice")
                seen.add((benchmark, safe_component(run_id)))
                runs.append(_parse_run(root, inside(bench_dir, safe_component(run_id)), benchmark, run_id))
            except (_Skip, ValueError) as exc:
                problems.append(str(exc))
    runs.sort(key=lambda r: (r.benchmark, r.finished_at, r.run_id))
    return runs, problems


# --------------------------------------------------------------------------- trends


def choose_method(run: RunRecord, methods=DEFAULT_METHODS) -> str | None:
    """The first of ``methods`` that gives a macro interval for some model of ``run``, or None."""
    present = {method for (metric, method) in (k for m in run.models for k in m.intervals) if metric == "macro"}
    return next((m for m in methods if m in present), None)


TREND_SCHEMA = {"benchmark": pl.String, "family": pl.String, "checkpoint": pl.String, "model": pl.String,
                "run_id": pl.String, "finished_at": pl.String, "run_order": pl.Int64, "metric": pl.String,
                "estimate": pl.Float64, "method": pl.String, "lower": pl.Float64, "upper": pl.Float64,
                "alpha": pl.Float64}


def trend_table(runs: list[RunRecord], methods=DEFAULT_METHODS) -> pl.DataFrame:
    """Long table, one row per (benchmark, model, run, metric): the numbers every trend shows.

    ``method`` is the benchmark's interval method (:func:`choose_method` on its latest run);
    ``lower``/``upper`` are null where a run lacks that method (drawn as a point without bar).
    ``run_order`` is 0 for a benchmark's oldest run.
    """
    rows = []
    by_bench: dict[str, list[RunRecord]] = {}
    for r in runs:
        by_bench.setdefault(r.benchmark, []).append(r)
    for bench, bruns in by_bench.items():
        bruns = sorted(bruns, key=lambda r: (r.finished_at, r.run_id))
        method = choose_method(bruns[-1], methods)
        for order, run in enumerate(bruns):
            for m in run.models:
                for metric in METRICS:
                    lo, hi = m.intervals.get((metric, method), (None, None)) if method else (None, None)
                    rows.append({"benchmark": bench, "family": m.family, "checkpoint": m.checkpoint,
                                 "model": m.model, "run_id": run.run_id, "finished_at": run.finished_at,
                                 "run_order": order, "metric": metric, "estimate": m.estimates[metric],
                                 "method": method, "lower": lo, "upper": hi, "alpha": run.alpha})
    return pl.DataFrame(rows, schema=TREND_SCHEMA)


def checkpoint_table(trends: pl.DataFrame) -> pl.DataFrame:
    """Per checkpointed family, each member's scores from the latest run that has it.

    Only families with at least one checkpoint id (``@``) appear.  Rows are ordered by
    benchmark, family, then checkpoint in natural order (the family's own id first).
    """
    if trends.height == 0:
        return trends
    fams = trends.filter(pl.col("checkpoint").is_not_null()).select("benchmark", "family").unique()
    latest = (trends.join(fams, on=["benchmark", "family"])
              .filter(pl.col("run_order") == pl.col("run_order").max().over("benchmark", "model")))
    rows = sorted(latest.iter_rows(named=True),
                  key=lambda r: (r["benchmark"], r["family"], checkpoint_key(r["checkpoint"]), r["metric"]))
    return pl.DataFrame(rows, schema=TREND_SCHEMA)


# --------------------------------------------------------------------------- SVG


def _nice_step(span: float, target: int = 5) -> float:
    raw = span / target
    mag = 10.0 ** math.floor(math.log10(raw))
    return next((k * mag for k in (1.0, 2.0, 2.5, 5.0) if raw <= k * mag * (1 + 1e-9)), 10.0 * mag)


def _n(x: float) -> str:
    s = f"{x:.1f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def trend_svg(labels: list[str], series: list[dict], *, title: str = "", width: int = 760,
              height: int = 250, max_label_chars: int = 18) -> str:
    """Inline-SVG trend: one x position per label, one series per metric, percent y axis.

    Each series is ``{"name", "estimate", "lower", "upper"}`` (sequences aligned with
    ``labels``, NaN/None for missing; optional ``"color"``, optional ``"tips"``: one tooltip per
    point).  A point is ``<g class="pt" data-series=.. data-i=.. data-estimate=..>`` with a
    ``<title>`` tooltip (no script needed), a vertical interval bar when both ends are finite,
    and a filled dot (hollow when there is no interval).  Consecutive finite estimates of a
    series are joined by a line.  Every label and name is escaped.
    """
    n = len(labels)
    if n == 0:
        return ""
    clean = []
    for s in series:
        arrs = {k: [float("nan") if v is None else float(v) for v in (s.get(k) or [None] * n)]
                for k in ("estimate", "lower", "upper")}
        if any(len(a) != n for a in arrs.values()):
            raise ValueError(f"series {s.get('name')!r}: values must align with {n} labels")
        tips = list(s.get("tips") or [""] * n)
        clean.append({"name": str(s.get("name", "")), "color": s.get("color") or "#333333", "tips": tips, **arrs})
    finite = [v for s in clean for k in ("estimate", "lower", "upper") for v in s[k] if math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    pad = (hi - lo) * 0.08
    lo, hi = lo - pad, hi + pad
    if hi - lo < 0.1:  # a flat series: show at least 10 points so noise does not look like a trend
        mid = (lo + hi) / 2
        lo, hi = mid - 0.05, mid + 0.05
    lo, hi = max(lo, 0.0), min(hi, 1.0)
    if hi - lo < 0.1:  # pinned at 0 or 1
        lo, hi = (0.0, 0.1) if lo <= 0.0 else (0.9, 1.0)
    step = _nice_step(hi - lo)
    ticks = [t * step for t in range(math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9) + 1)]
    dec = max(0, -math.floor(math.log10(step * 100) + 1e-9))

    rotate = n > 6
    x0, x1 = 58.0, width - 14.0
    y0 = 40.0 if title else 26.0
    y1 = height - (64.0 if rotate else 30.0)
    col = (x1 - x0) / n

    def sx(i: int, k: int) -> float:
        return x0 + (i + 0.5) * col + (k - (len(clean) - 1) / 2) * min(6.0, col / 4)

    def sy(v: float) -> float:
        return y1 - (v - lo) / (hi - lo) * (y1 - y0)

    out = [f'<svg class="trend" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'font-family="system-ui,sans-serif" font-size="11">',
           f"<title>{_esc(title or 'trend')}</title>",
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    if title:
        out.append(f'<text x="{_n(x0)}" y="16" font-size="13" font-weight="600" fill="#1f2328">{_esc(title)}</text>')
    lx = x0
    for s in clean:  # legend
        out.append(f'<line x1="{_n(lx)}" y1="28" x2="{_n(lx + 16)}" y2="28" stroke="{_esc(s["color"])}" '
                   f'stroke-width="2"/><text x="{_n(lx + 20)}" y="32" fill="#1f2328">{_esc(s["name"])}</text>')
        lx += 30 + 7 * len(s["name"])
    out.append('<g class="axis" fill="#59636e">')
    for t in ticks:
        y = sy(t)
        out.append(f'<line x1="{_n(x0)}" y1="{_n(y)}" x2="{_n(x1)}" y2="{_n(y)}" stroke="#e1e4e8"/>'
                   f'<text x="{_n(x0 - 6)}" y="{_n(y + 4)}" text-anchor="end">{100 * t:.{dec}f}%</text>')
    every = max(1, math.ceil(n / 24))  # at most ~24 readable x labels; tooltips name every point
    for i, lab in enumerate(labels):
        if i % every:
            continue
        text = lab if len(lab) <= max_label_chars else lab[: max_label_chars - 1] + "\u2026"
        x, y = x0 + (i + 0.5) * col, y1 + 14
        rot = f' transform="rotate(-35 {_n(x)} {_n(y)})" text-anchor="end"' if rotate else ' text-anchor="middle"'
        out.append(f'<text class="xlab" x="{_n(x)}" y="{_n(y)}"{rot}><title>{_esc(lab)}</title>{_esc(text)}</text>')
    out.append(f'<line x1="{_n(x0)}" y1="{_n(y1)}" x2="{_n(x1)}" y2="{_n(y1)}" stroke="#8c959f"/></g>')
    for k, s in enumerate(clean):
        c = _esc(s["color"])
        segs, cur = [], []
        for i in range(n):
            if math.isfinite(s["estimate"][i]):
                cur.append(f"{_n(sx(i, k))},{_n(sy(s['estimate'][i]))}")
            elif cur:
                segs.append(cur)
                cur = []
        segs.append(cur)
        for seg in segs:
            if len(seg) > 1:
                out.append(f'<polyline class="line" points="{" ".join(seg)}" fill="none" stroke="{c}" '
                           f'stroke-width="1.5" stroke-opacity="0.7"/>')
        for i in range(n):
            e, l, u = s["estimate"][i], s["lower"][i], s["upper"][i]
            if not math.isfinite(e):
                continue
            x, tip = sx(i, k), s["tips"][i] or f"{s['name']} {labels[i]}: {_pct(e)} {_iv(l, u)}"
            out.append(f'<g class="pt" data-series="{_esc(s["name"])}" data-i="{i}" data-estimate="{e!r}">'
                       f"<title>{_esc(tip)}</title>")
            if math.isfinite(l) and math.isfinite(u):
                out.append(f'<line x1="{_n(x)}" y1="{_n(sy(l))}" x2="{_n(x)}" y2="{_n(sy(u))}" stroke="{c}" '
                           f'stroke-width="1.5"/><line x1="{_n(x - 3)}" y1="{_n(sy(l))}" x2="{_n(x + 3)}" '
                           f'y2="{_n(sy(l))}" stroke="{c}"/><line x1="{_n(x - 3)}" y1="{_n(sy(u))}" '
                           f'x2="{_n(x + 3)}" y2="{_n(sy(u))}" stroke="{c}"/>'
                           f'<circle cx="{_n(x)}" cy="{_n(sy(e))}" r="3" fill="{c}"/>')
            else:
                out.append(f'<circle class="point-only" cx="{_n(x)}" cy="{_n(sy(e))}" r="3" fill="#ffffff" '
                           f'stroke="{c}" stroke-width="1.5"/>')
            out.append("</g>")
    out.append("</svg>")
    return "".join(out)


# --------------------------------------------------------------------------- HTML pages

_CSS = """
:root{--fg:#1f2328;--muted:#59636e;--border:#d0d7de;--alt:#f6f8fa;--accent:#0969da;--bad:#cf222e;--good:#1a7f37}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,Arial,sans-serif;color:var(--fg);margin:0 auto;
max-width:1180px;padding:20px 28px 48px}
a{color:var(--accent)}
h1{font-size:1.6em;margin:.3em 0 .2em;overflow-wrap:anywhere}
h2{font-size:1.25em;margin:1.6em 0 .5em;border-bottom:1px solid var(--border);padding-bottom:4px}
h3{font-size:1.05em;margin:1.2em 0 .4em;overflow-wrap:anywhere}
nav.crumbs{font-size:13px;color:var(--muted)}
nav.crumbs a{color:var(--muted)}
p.note{color:var(--muted);font-size:13px}
table{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums;margin:0 0 1em}
th,td{padding:3px 10px;border-bottom:1px solid var(--border);text-align:left;vertical-align:top;
overflow-wrap:anywhere}
thead th{background:var(--alt);font-weight:600}
td.num,th.num{text-align:right;white-space:nowrap}
.table-wrap{overflow-x:auto;max-width:100%}
.bad{color:var(--bad);font-weight:600}
.good{color:var(--good)}
ul.problems li{color:var(--bad)}
details{margin:.3em 0 1em}
summary{cursor:pointer;color:var(--muted);font-size:13px}
svg{max-width:100%;height:auto;display:block}
iframe.report{width:100%;height:80vh;border:1px solid var(--border);border-radius:4px}
footer{color:var(--muted);font-size:12px;border-top:1px solid var(--border);margin-top:40px;padding-top:8px}
""".strip()


def _page(title: str, crumbs: list[tuple[str | None, str]], body: list[str], generated: str) -> str:
    nav = " / ".join(_link(href, text) if href else _esc(text) for href, text in crumbs)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_esc(SITE_CSP)}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # An inline icon stops the browser from asking the server for /favicon.ico.
        '<link rel="icon" href="data:,">',
        f"<title>{_esc(title)}</title>", f"<style>\n{_CSS}\n</style>", "</head>", "<body>",
        f'<nav class="crumbs">{nav}</nav>', f"<h1>{_esc(title)}</h1>", *body,
        f"<footer>benchcert dashboard \u00b7 built {_esc(generated)} from run artifacts \u00b7 "
        "static and offline: no scripts, no network</footer>", "</body>", "</html>", ""])


def _table(headers: list, rows: list[list], *, cls: str = "", num: set[int] = frozenset(),
           cell_cls: list[str] | None = None) -> str:
    def td(i, v):
        classes = " ".join(c for c in (("num" if i in num else ""), (cell_cls[i] if cell_cls else "")) if c)
        return f'<td class="{classes}">{_h(v)}</td>' if classes else f"<td>{_h(v)}</td>"

    head = "".join(f'<th scope="col"{" class=num" if i in num else ""}>{_h(h)}</th>' for i, h in enumerate(headers))
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    body = "".join("<tr>" + "".join(td(i, v) for i, v in enumerate(r)) + "</tr>" for r in rows)
    if not rows:
        body = f'<tr><td colspan="{len(headers)}">none</td></tr>'
    attr = f' class="{_esc(cls)}"' if cls else ""
    return (f'<div class="table-wrap"><table{attr}>'
            f"{thead}<tbody>{body}</tbody></table></div>")


def _href(*parts: str) -> str:
    return "/".join(quote(p, safe="") for p in parts)


def _level(alpha: float) -> str:
    return f"{100 * (1 - alpha):g}%"


def _models_table(run: RunRecord, method: str | None) -> str:
    level = _level(run.alpha)
    head = ["model", "checkpoint of", "items", "coverage", "macro", f"macro {level} ({method or 'no interval'})",
            "pooled", f"pooled {level} ({method or 'no interval'})"]
    rows = []
    for m in sorted(run.models, key=lambda m: -m.estimates["macro"]):
        fam, ck = split_checkpoint(m.model)
        rows.append([m.model, fam if ck is not None else "", m.n_items, f"{100 * m.coverage:.1f}%",
                     _pct(m.estimates["macro"]), _iv(*m.intervals.get(("macro", method), (None, None))),
                     _pct(m.estimates["pooled"]), _iv(*m.intervals.get(("pooled", method), (None, None)))])
    return _table(head, rows, cls="models", num={2, 3, 4, 5, 6, 7},
                  cell_cls=["model", "family", "items", "coverage", "macro", "macro-iv", "pooled", "pooled-iv"])


def _run_page(run: RunRecord, method: str | None, bench_href: str, generated: str, has_report: bool,
              sibling_ids: set[str]) -> str:
    body = [_table(["", ""], [  # no header row: a key/value list
        ["benchmark", _link(f"../{bench_href}", run.benchmark)], ["run id", run.run_id],
        ["started", run.started_at], ["finished", run.finished_at], ["Prefect flow run", run.flow_run_id or _DASH],
        ["variant", repr(run.variant)], ["models", run.n_models], ["items", run.n_items],
        ["subjects", run.n_subjects], ["domains", run.n_domains], ["alpha", f"{run.alpha:g}"],
        ["files", _Html(" \u00b7 ".join(_link(f, f) for f in (["report.html"] if has_report else [])
                                         + ["summary.json", "manifest.json"]))],
    ], cls="meta")]
    if run.regressions:
        body.append('<p class="bad">Regressions: ' + ", ".join(_esc(m) for m in run.regressions) + "</p>")
    body.append(f"<h2>Models</h2><p class=\"note\">{_level(run.alpha)} intervals, method "
                f"{_esc(method or 'none available')}; sorted by macro score.</p>")
    body.append(_models_table(run, method))
    ch = run.changes
    if ch is not None:
        body.append("<h2>Changes since the previous run</h2>")
        prev = ch.get("previous_run_id")
        if not prev:
            body.append('<p class="note">First run of this benchmark.</p>')
        else:
            # Link only to a run the site has (a skipped run has no page).
            prev_html = (_link("../" + _href(safe_component(prev)) + "/index.html", prev) if prev in sibling_ids
                         else _esc(prev))
            body.append(f"<p>Previous run: {prev_html}."
                        f" New models: {_esc(', '.join(map(str, ch.get('new_models') or [])) or 'none')}."
                        f" Removed: {_esc(', '.join(map(str, ch.get('removed_models') or [])) or 'none')}.</p>")
            moves = [mv for mv in ch.get("moves") or [] if isinstance(mv, dict)]
            body.append(_table(["model", "metric", "direction", "previous", "previous interval", "method", "now"], [
                [mv.get("model"), mv.get("metric"),
                 _Html(f'<span class="{"bad" if mv.get("direction") == "down" else "good"}">'
                       f'{_esc(mv.get("direction"))}</span>'),
                 _pct(_num(mv.get("previous"))), _iv(_num(mv.get("previous_lower")), _num(mv.get("previous_upper"))),
                 mv.get("method"), _pct(_num(mv.get("current")))] for mv in moves], cls="moves", num={3, 4, 6}))
    if run.verdicts:
        body.append("<h2>Verdicts</h2>")
        body.append(_table(["kind", "model", "baseline", "verdict"], [
            [v.get("kind"), v.get("model"), v.get("baseline") or _DASH,
             _Html(f'<span class="{"bad" if v.get("verdict") == "regressed" else ""}">{_esc(v.get("verdict"))}</span>')]
            for v in run.verdicts], cls="verdicts"))
    if run.warnings:
        body.append("<h2>Warnings</h2><ul>" + "".join(f"<li>{_esc(w)}</li>" for w in run.warnings) + "</ul>")
    body.append("<h2>Sources</h2>")
    body.append(_table(["path", "sha256", "format", "rows added", "ingested"], [
        [s.get("path"), s.get("sha256"), s.get("format"), s.get("rows_added"), s.get("ingested_at")]
        for s in run.sources], cls="sources", num={3}))
    body.append("<h2>Tables</h2>")
    body.append(_table(["name", "file", "rows", "columns"], [
        [t.get("name"), t.get("file"), t.get("rows"), ", ".join(map(str, t.get("columns") or []))]
        for t in run.tables], num={2}))
    body.append("<h2>Report</h2>")
    if has_report:
        # Same-origin but without allow-scripts: the report cannot run code even if it held some.
        body.append('<p><a href="report.html">Open the full report</a></p>'
                    '<iframe class="report" src="report.html" title="run report" sandbox="allow-same-origin">'
                    "</iframe>")
    else:
        body.append('<p class="note">This run has no report.html.</p>')
    return _page(f"Run {run.run_id}", [("../../index.html", "dashboard"), (f"../{bench_href}", run.benchmark),
                                       (None, run.run_id)], body, generated)


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _when(timestamp: str) -> str:
    """'2026-11-26T02:00:03.123Z' -> '2026-11-26 02:00' (an x label; tooltips keep the run id)."""
    return timestamp[:16].replace("T", " ")


def _series(rows: list[dict]) -> list[dict]:
    """Trend series (macro, pooled) from trend-table rows holding one point per metric."""
    out = []
    for metric in METRICS:
        rs = [r for r in rows if r["metric"] == metric]
        out.append({"name": metric, "color": _COLORS[metric],
                    "estimate": [r["estimate"] for r in rs], "lower": [r["lower"] for r in rs],
                    "upper": [r["upper"] for r in rs],
                    "tips": [f"{r['model']} \u00b7 {metric} {_pct(r['estimate'])} {_iv(r['lower'], r['upper'])} "
                             f"\u00b7 run {r['run_id']} ({r['finished_at']})" for r in rs]})
    return out


def _values_table(rows: list[dict], run_links: dict[str, str]) -> str:
    """The numbers behind a trend: one row per (model, run), macro and pooled side by side."""
    by: dict[tuple[str, str], dict] = {}
    for r in rows:
        by.setdefault((r["model"], r["run_id"]), {})[r["metric"]] = r
    out = []
    for (model, run_id), d in by.items():
        mac, poo = d["macro"], d["pooled"]
        out.append([model, _link(run_links[run_id], run_id), mac["finished_at"], _pct(mac["estimate"]),
                    _iv(mac["lower"], mac["upper"]), _pct(poo["estimate"]), _iv(poo["lower"], poo["upper"])])
    return _table(["model", "run", "finished", "macro", "macro interval", "pooled", "pooled interval"], out,
                  cls="values", num={3, 4, 5, 6}, cell_cls=["model", "run", "finished", "macro", "macro-iv",
                                                            "pooled", "pooled-iv"])


def _bench_page(bench: str, runs: list[RunRecord], trends: pl.DataFrame, ckpts: pl.DataFrame, method: str | None,
                run_href: dict[str, str], generated: str, max_trend_runs: int) -> str:
    latest = runs[-1]
    level = _level(latest.alpha)
    body = [f"<p>{len(runs)} run(s); latest {_link(run_href[latest.run_id], latest.run_id)} finished "
            f"{_esc(latest.finished_at)}: {latest.n_models} models, {latest.n_items} items. Intervals: "
            f"{level} <b>{_esc(method or 'none available')}</b>.</p>"]
    if latest.regressions:
        body.append('<p class="bad">Regressions in the latest run: '
                    + ", ".join(_esc(m) for m in latest.regressions) + "</p>")

    body.append("<h2>Latest run</h2>")
    ordered = sorted(latest.models, key=lambda m: m.estimates["macro"])
    if ordered:
        body.append(interval_plot_svg([m.model for m in ordered], [
            {"name": metric, "color": _COLORS[metric], "estimate": [m.estimates[metric] for m in ordered],
             "lower": [m.intervals.get((metric, method), (math.nan, math.nan))[0] for m in ordered],
             "upper": [m.intervals.get((metric, method), (math.nan, math.nan))[1] for m in ordered]}
            for metric in METRICS], title=f"{bench}: latest run, {level} {method or ''}", x_label="score"))
    body.append(_models_table(latest, method))

    t = trends.filter(pl.col("benchmark") == bench)
    c = ckpts.filter(pl.col("benchmark") == bench)
    if c.height:
        body.append('<h2 id="checkpoints">Checkpoints</h2><p class="note">Each checkpoint\'s scores from the latest '
                    "run that includes it, in checkpoint order.</p>")
        for fam in c["family"].unique(maintain_order=True).to_list():
            rows = c.filter(pl.col("family") == fam).to_dicts()
            labels = [r["checkpoint"] or r["model"] for r in rows if r["metric"] == "macro"]
            body.append(f'<section class="family"><h3>{_esc(fam)}</h3>')
            body.append(trend_svg(labels, _series(rows), title=f"{fam} across checkpoints"))
            body.append(_values_table(rows, run_href) + "</section>")

    body.append('<h2 id="runs">Across runs</h2>')
    all_ids = [r.run_id for r in runs]
    shown_ids = all_ids[-max_trend_runs:]
    if len(shown_ids) < len(all_ids):
        body.append(f'<p class="note">Charts show the last {len(shown_ids)} of {len(all_ids)} runs.</p>')
    if len(all_ids) == 1:
        body.append('<p class="note">One run so far: trends are drawn from the second run on.</p>')
    shown = t.filter(pl.col("run_id").is_in(shown_ids))
    families = sorted(t["family"].unique().to_list())
    for fam in families:
        body.append(f'<section class="family"><h3>{_esc(fam)}</h3>')
        members = sorted(t.filter(pl.col("family") == fam)["model"].unique().to_list(),
                         key=lambda m: checkpoint_key(split_checkpoint(m)[1]))
        for model in members:
            rows = shown.filter(pl.col("model") == model).sort("run_order", "metric").to_dicts()
            when = [_when(r["finished_at"]) for r in rows if r["metric"] == "macro"]
            charted = len(when) >= 2  # a single point is no trend; its numbers are shown open instead
            if charted:
                body.append(trend_svg(when, _series(rows), title=model))
            body.append(("<details>" if charted else "<details open>") + "<summary>numbers for " + _esc(model)
                        + "</summary>"
                        + _values_table(t.filter(pl.col("model") == model).sort("run_order").to_dicts(), run_href)
                        + "</details>")
        body.append("</section>")

    body.append('<h2>All runs</h2>')
    body.append(_table(["run", "finished", "models", "items", "regressions"], [
        [_link(run_href[r.run_id], r.run_id), r.finished_at, r.n_models, r.n_items,
         ", ".join(r.regressions) or _DASH] for r in reversed(runs)], cls="runs", num={2, 3}))
    return _page(bench, [("../index.html", "dashboard"), (None, bench)], body, generated)


def _index_page(by_bench: dict[str, list[RunRecord]], bench_dir: dict[str, str], problems: list[str],
                artifacts_root: Path, generated: str, methods) -> str:
    body = [f'<p class="note">Built from the artifacts at {_esc(artifacts_root)}.</p>', "<h2>Benchmarks</h2>"]
    rows = []
    for bench, runs in sorted(by_bench.items()):
        last = runs[-1]
        rows.append([_link(_href(bench_dir[bench]) + "/index.html", bench), len(runs),
                     _link(_href(bench_dir[bench], safe_component(last.run_id)) + "/index.html", last.run_id),
                     last.finished_at, last.n_models, last.n_items, ", ".join(last.regressions) or _DASH])
    body.append(_table(["benchmark", "runs", "latest run", "finished", "models", "items", "regressions"], rows,
                       cls="benchmarks", num={1, 4, 5}))
    body.append("<h2>Latest results</h2>")
    for bench, runs in sorted(by_bench.items()):
        last = runs[-1]
        method = choose_method(last, methods)
        body.append(f'<section class="latest"><h3>{_link(_href(bench_dir[bench]) + "/index.html", bench)}</h3>'
                    f'<p class="note">Run {_esc(last.run_id)}, {_level(last.alpha)} intervals '
                    f"({_esc(method or 'none available')}).</p>{_models_table(last, method)}</section>")
    body.append("<h2>Runs</h2>")
    all_runs = sorted((r for rs in by_bench.values() for r in rs), key=lambda r: (r.finished_at, r.run_id),
                      reverse=True)
    body.append(_table(["finished", "benchmark", "run", "models", "items", "regressions"], [
        [r.finished_at, _link(_href(bench_dir[r.benchmark]) + "/index.html", r.benchmark),
         _link(_href(bench_dir[r.benchmark], safe_component(r.run_id)) + "/index.html", r.run_id),
         r.n_models, r.n_items, ", ".join(r.regressions) or _DASH] for r in all_runs], cls="runs", num={3, 4}))
    if problems:
        body.append("<h2>Skipped</h2><ul class=\"problems\">"
                    + "".join(f"<li>{_esc(p)}</li>" for p in problems) + "</ul>")
    return _page("benchcert dashboard", [(None, "dashboard")], body, generated)


# --------------------------------------------------------------------------- build


@dataclass(frozen=True)
class SiteReport:
    out: Path
    benchmarks: int
    runs: int
    pages: int
    problems: tuple[str, ...]


def _copy_inside(root: Path, src: Path, dst: Path) -> bool:
    try:
        real = inside(root, str(src.relative_to(root)))
    except ValueError:
        return False
    if not real.is_file():
        return False
    shutil.copyfile(real, dst)
    return True


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise OutputFolderError(f"{out} exists and is not a benchcert dashboard; refusing to replace it "
                             "(choose an empty or new --out folder)")


def build_site(artifacts_root: str | os.PathLike, out_dir: str | os.PathLike, *, methods=DEFAULT_METHODS,
               max_trend_runs: int = 90, now: dt.datetime | None = None) -> SiteReport:
    """Build the static dashboard of ``artifacts_root`` into ``out_dir`` and return what was built.

    The site is written to a hidden sibling of ``out_dir`` and swapped into place under a lock
    (a server on ``out_dir`` sees the old or the new site); ``out_dir`` is replaced only when
    empty or built by an earlier call.  Runs that cannot be read are listed on the index page
    and in :attr:`SiteReport.problems`, and the rest is built.
    """
    if max_trend_runs < 1:
        raise ValueError(f"max_trend_runs must be >= 1; got {max_trend_runs!r}")
    root, out = Path(artifacts_root).resolve(), Path(out_dir)
    if out.resolve() == root.resolve() or root.resolve() in out.resolve().parents:
        raise OutputFolderError(f"--out {out} must not be inside the artifacts root {root}")
    _check_out(out)
    runs, problems = load_runs(root)
    generated = iso(now or dt.datetime.now(dt.timezone.utc))
    by_bench: dict[str, list[RunRecord]] = {}
    for r in runs:
        by_bench.setdefault(r.benchmark, []).append(r)
    trends = trend_table(runs, methods)
    ckpts = checkpoint_table(trends)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    pages = 0
    try:
        (tmp / MARKER).write_text("built by benchcert dashboard build\n", encoding="utf-8")
        bench_dir = {b: safe_component(b) for b in by_bench}
        for bench, bruns in by_bench.items():
            method = choose_method(bruns[-1], methods)
            bdir = inside(tmp, bench_dir[bench])
            bdir.mkdir()
            run_href = {r.run_id: _href(safe_component(r.run_id)) + "/index.html" for r in bruns}
            for run in bruns:
                rdir = inside(bdir, safe_component(run.run_id))
                rdir.mkdir()
                has_report = _copy_inside(root, run.run_dir / "report.html", rdir / "report.html")
                for name in ("summary.json", "manifest.json"):
                    _copy_inside(root, run.run_dir / name, rdir / name)
                (rdir / "index.html").write_text(_run_page(run, method, "index.html", generated, has_report,
                                                           set(run_href)),
                                                 encoding="utf-8")
                pages += 1
            (bdir / "index.html").write_text(
                _bench_page(bench, bruns, trends, ckpts, method, run_href, generated, max_trend_runs),
                encoding="utf-8")
            pages += 1
        (tmp / "index.html").write_text(_index_page(by_bench, bench_dir, problems, root, generated, methods),
                                        encoding="utf-8")
        pages += 1
        with FileLock(str(out.parent / f".{out.name}.lock"), timeout=120):
            _check_out(out)
            old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
            if out.exists():
                os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return SiteReport(out=out, benchmarks=len(by_bench), runs=len(runs), pages=pages, problems=tuple(problems))


# --------------------------------------------------------------------------- serve


class _SiteHandler(SimpleHTTPRequestHandler):
    """GET/HEAD of files inside the site folder only: no listings, no dotfiles, no symlinks out."""

    server_version = "benchcert-dashboard"
    sys_version = ""
    quiet = False
    #: Seconds a connection may sit idle (nothing sent) before it is closed, so half-open or
    #: slow clients cannot hold threads forever.
    timeout = 20.0

    def send_head(self):
        rel = unquote(urlsplit(self.path).path)
        if any(part.startswith(".") for part in rel.split("/") if part) or "\\" in rel or "\x00" in rel:
            self.send_error(404)
            return None
        root = os.path.realpath(self.directory)
        real = os.path.realpath(self.translate_path(self.path))
        if real != root and not real.startswith(root + os.sep):
            self.send_error(404)
            return None
        if os.path.isdir(real) and not os.path.isfile(os.path.join(real, "index.html")):
            self.send_error(404)
            return None
        return super().send_head()

    def list_directory(self, path):
        self.send_error(404)
        return None

    def end_headers(self):
        self.send_header("Content-Security-Policy", SITE_CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "SAMEORIGIN")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, format, *args):
        if not self.quiet:
            super().log_message(format, *args)


class _BoundedServer(ThreadingHTTPServer):
    """A threading server that serves at most ``max_connections`` connections at once; a
    connection beyond that is closed at once instead of costing a thread."""

    daemon_threads = True
    max_connections = 64

    def server_activate(self):
        self._slots = threading.BoundedSemaphore(self.max_connections)
        super().server_activate()

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def make_server(directory: str | os.PathLike, host: str = "127.0.0.1", port: int = 8765, *,
                quiet: bool = False, idle_timeout: float = 20.0, max_connections: int = 64) -> ThreadingHTTPServer:
    """An HTTP server for a built site (call ``serve_forever``); port 0 picks a free port.

    A connection idle for ``idle_timeout`` seconds (no request line, or a request sent too
    slowly) is closed, and at most ``max_connections`` are served at once (more are closed
    on arrival), so half-open or slow clients cannot pile up threads.

    Raises
    ------
    DashboardError
        When ``directory`` holds no built dashboard (no index.html).
    """
    directory = Path(directory)
    if not (directory / "index.html").is_file():
        raise DashboardError(f"{directory}: no dashboard here (no index.html); build one with "
                             "`benchcert dashboard build --artifacts DIR --out DIR`")
    if not idle_timeout > 0:
        raise ValueError(f"idle_timeout must be > 0; got {idle_timeout!r}")
    if not max_connections >= 1:
        raise ValueError(f"max_connections must be >= 1; got {max_connections!r}")
    handler = type("Handler", (_SiteHandler,), {"quiet": quiet, "timeout": float(idle_timeout)})
    server_cls = type("Server", (_BoundedServer,), {"max_connections": int(max_connections)})
    return server_cls((host, port), lambda *a, **k: handler(*a, directory=str(directory), **k))
