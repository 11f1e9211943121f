"""The runs a dashboard shows, read from the artifact contract, and the trend rows built from them.

Only ``<root>/index.json`` and each run's ``manifest.json`` and ``summary.json`` are read, never
the live DuckDB store.  A run folder that is missing, unreadable, outside the root or
inconsistent with index.json is skipped and named, never fatal (:func:`load_runs`).

A checkpoint is a model id with an ``@``: ``"org/model@step-12000"`` is checkpoint
``"step-12000"`` of family ``"org/model"`` (:func:`split_checkpoint`).  Checkpoints are
ordered naturally (``step-2000`` before ``step-12000``).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from benchcert.tasks.artifacts.folders import benchmark_folder, folder_candidates, inside, safe_component
from benchcert.tasks.errors import DataError

__all__ = [
    "DEFAULT_METHODS",
    "METRICS",
    "DashboardError",
    "ModelScore",
    "RunRecord",
    "split_checkpoint",
    "checkpoint_key",
    "load_runs",
    "Listing",
    "read_listing",
    "read_listed",
    "sort_runs",
    "choose_method",
    "headline_order",
    "method_label",
    "score_interval",
    "trend_rows",
    "checkpoint_rows",
]

#: Interval shown per score, most defensible first; the first one present in a benchmark's latest
#: run is used on all of that benchmark's pages (same order as the run-change detector).
#: ``headline`` is each score's headline interval (summary.json 1.2: the new-subjects or the same-subjects
#: interval, by the audit's rule, tasks/audit/headline.py); runs before 1.2 headlined the hierarchical one.
DEFAULT_METHODS = ("headline", "hierarchical", "clustered_subject", "wilson", "iid_clt")

METRICS = ("macro", "pooled")


class DashboardError(DataError):
    """The artifacts cannot be read as a whole, or the output folder cannot be used (exit code 1;
    :class:`~benchcert.tasks.render.dashboard.OutputFolderError` 2)."""


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
    questions: dict[str, str] = field(default_factory=dict)  # metric -> the headline's question
    rank: int | None = None  # the comparisons' rank (1 = best), its simultaneous interval and tied groups
    rank_lower: int | None = None
    rank_upper: int | None = None
    tied_groups: tuple[int, ...] = ()

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
    item_analysis: dict | None = None  # summary.json's item_analysis (audit --items), else None

    @functools.cached_property  # a run's regressions are asked for by several pages
    def regressions(self) -> list[str]:
        from benchcert.tasks.audit.regressions import regressed_models

        # The summary's own list is kept (a run written by an earlier version may have listed others);
        # the verdicts count for a first run too, which has no changes.
        moves = [m.get("model") for m in (self.changes or {}).get("moves") or [] if m.get("direction") == "down"]
        listed = (self.changes or {}).get("regressions") or []
        return regressed_models([*moves, *listed], ((v.get("model"), v.get("verdict")) for v in self.verdicts))


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
    """A run's JSON file.  Its folder was resolved inside ``root`` (:func:`load_runs`), so a regular file there is
    read as it is; a symlink only when it resolves inside ``root``."""
    try:
        regular = stat.S_ISREG(os.lstat(path).st_mode)
    except OSError as exc:
        raise _Skip(f"{path}: unreadable ({exc})") from None
    if not regular:
        try:
            path = inside(root, str(path.relative_to(root)))  # a symlink out of the root is not read
        except ValueError as exc:
            raise _Skip(str(exc)) from None
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise _Skip(f"{path}: unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise _Skip(f"{path}: not a JSON object")
    return data


def _finite(v) -> bool:
    return type(v) in (float, int) and math.isfinite(v)


class _NotPlain(Exception):
    """A model entry the fast reader does not take as it is; the checked reader decides (and names the field)."""


def _plain_float(v) -> float:
    if type(v) is not float or v - v != 0:  # not a float, or NaN / +-inf (``x - x == 0`` for finite x only)
        raise _NotPlain
    return v


def _parse_model(m, where: str) -> ModelScore:
    """One model of summary.json: the common well-formed entry (every number a finite float, every name a
    string) read without a call per field; anything else by :func:`_parse_model_checked`, which accepts or
    refuses exactly as before and names the field.  Reading the models was most of a 10,000-run build's reading."""
    try:
        if type(m) is not dict:
            raise _NotPlain
        name, n_items, coverage = m.get("model"), m.get("n_items"), _plain_float(m.get("coverage"))
        if type(name) is not str or type(n_items) is not int:
            raise _NotPlain
        estimates, intervals, questions = {}, {}, {}
        for metric in METRICS:
            score = m.get(metric)
            if type(score) is not dict:
                raise _NotPlain
            estimates[metric] = _plain_float(score.get("estimate"))
            ivs = score.get("intervals") or ()
            if type(ivs) not in (list, tuple):
                raise _NotPlain
            for iv in ivs:
                if type(iv) is not dict or type(iv.get("method")) is not str:
                    raise _NotPlain
                intervals[(metric, iv["method"])] = (_plain_float(iv.get("lower")), _plain_float(iv.get("upper")))
            head = score.get("headline")
            if type(head) is dict:
                if type(head.get("question")) is not str:
                    raise _NotPlain
                intervals[(metric, "headline")] = (_plain_float(head.get("lower")), _plain_float(head.get("upper")))
                questions[metric] = head["question"]
            elif isinstance(head, dict):
                raise _NotPlain
        groups = m.get("tied_groups") or ()
        if type(groups) not in (list, tuple):
            raise _NotPlain
        rank, lower, upper = m.get("rank"), m.get("rank_lower"), m.get("rank_upper")
    except _NotPlain:
        return _parse_model_checked(m, where)
    return ModelScore(model=name, n_items=n_items, coverage=coverage, estimates=estimates, intervals=intervals,
                      questions=questions, tied_groups=tuple(g for g in groups if type(g) is int),
                      rank=rank if type(rank) is int else None, rank_lower=lower if type(lower) is int else None,
                      rank_upper=upper if type(upper) is int else None)


def _parse_model_checked(m, where: str) -> ModelScore:
    """One model of summary.json.  Checked field by field, but the messages (with the field's place) are built
    only for a field that fails: building them for every field took most of a 10,000-run dashboard's reading."""
    name = _need(m, "model", str, where)
    estimates, intervals, questions = {}, {}, {}
    for metric in METRICS:
        score = m.get(metric)
        if not isinstance(score, dict):
            score = _need(m, metric, dict, f"{where}, model {name!r}")  # raises: missing or not an object
        est = score.get("estimate")
        estimates[metric] = float(est) if _finite(est) else _need(score, "estimate", float,
                                                                  f"{where}, model {name!r} {metric}")
        ivs = score.get("intervals") or []
        if not isinstance(ivs, list):  # a number or an object there is a malformed run, skipped with its place
            ivs = _need(score, "intervals", list, f"{where}, model {name!r} {metric}")
        for iv in ivs:
            method, lo, hi = (iv.get("method"), iv.get("lower"), iv.get("upper")) if isinstance(iv, dict) else (None,) * 3
            if not (isinstance(method, str) and _finite(lo) and _finite(hi)):
                at = f"{where}, model {name!r} {metric}"
                method = _need(iv, "method", str, at)
                lo, hi = _need(iv, "lower", float, f"{at} {method}"), _need(iv, "upper", float, f"{at} {method}")
            intervals[(metric, method)] = (float(lo), float(hi))
        head = score.get("headline")
        if isinstance(head, dict):
            lo, hi, question = head.get("lower"), head.get("upper"), head.get("question")
            if not (_finite(lo) and _finite(hi) and isinstance(question, str)):
                at = f"{where}, model {name!r} {metric} headline"
                lo, hi, question = _need(head, "lower", float, at), _need(head, "upper", float, at), \
                    _need(head, "question", str, at)
            intervals[(metric, "headline")] = (float(lo), float(hi))
            questions[metric] = question
    rank = {k: m.get(k) if isinstance(m.get(k), int) and not isinstance(m.get(k), bool) else None
            for k in ("rank", "rank_lower", "rank_upper")}
    # Tied groups are read leniently, as ranks are: what is not a list of integers shows no group.
    raw_groups = m.get("tied_groups")
    groups = tuple(g for g in raw_groups if isinstance(g, int) and not isinstance(g, bool)) \
        if isinstance(raw_groups, list) else ()
    where = f"{where}, model {name!r}"
    return ModelScore(model=name, n_items=_need(m, "n_items", int, where),
                      coverage=_need(m, "coverage", float, where), estimates=estimates, intervals=intervals,
                      questions=questions, tied_groups=groups, **rank)


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
        item_analysis=summary.get("item_analysis") if isinstance(summary.get("item_analysis"), dict) else None,
    )


def _run_folder(bench_dir: Path, component: str) -> Path:
    """``bench_dir/component`` (``bench_dir`` resolved inside the root, ``component`` a plain folder name from
    :func:`~benchcert.tasks.artifacts.folders.safe_component`): a real directory there is inside as it is, which one
    ``lstat`` shows; anything else (a symlink) is resolved and refused when it leads out.  Resolving every run's
    folder was a fifth of reading 10,000 runs."""
    path = bench_dir / component
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode) and component not in (".", ".."):
            return path
    except OSError:
        pass
    return inside(bench_dir, component)


def load_runs(artifacts_root: str | os.PathLike, *, cache=None, listing: Listing | None = None) -> tuple[
        list[RunRecord], list[str]]:
    """Every completed run listed in ``<root>/index.json``, oldest first per benchmark.

    Returns the runs and a list of problems (a run folder that is missing, unreadable, outside
    the root or inconsistent with index.json is skipped and named there, never fatal).  With ``cache`` (a
    :class:`~benchcert.tasks.render.record_cache.RecordCache`), a run whose files are unchanged since the cache
    kept its record is not read again, and every run read is kept in it.  ``listing``: the root's
    :func:`read_listing`, when the caller has read it already (``artifacts_root`` is then not read again).

    Raises
    ------
    DashboardError
        When ``root`` has no readable index.json (it is not an artifacts root).
    """
    if listing is None:
        listing = read_listing(artifacts_root)
    visited, problems = read_listed(listing, cache=cache)
    return sort_runs([r for _, r in visited]), [text for _, text in problems]


@dataclass(frozen=True)
class Listing:
    """The runs ``<root>/index.json`` lists (:func:`read_listing`), before any is read."""

    root: Path
    index_path: Path
    entries: list

    def run_counts(self) -> dict[str, int]:
        """Each benchmark's number of listed runs (what reading and rendering it costs, in runs)."""
        out: dict[str, int] = {}
        for entry in self.entries:
            if isinstance(entry, dict) and isinstance(entry.get("benchmark"), str):
                runs = entry.get("runs")
                out[entry["benchmark"]] = out.get(entry["benchmark"], 0) + (len(runs) if isinstance(runs, list) else 0)
        return out


def read_listing(artifacts_root: str | os.PathLike) -> Listing:
    """The benchmarks and run ids ``<root>/index.json`` lists (rebuilt from the run folders when it is missing or
    damaged); :class:`DashboardError` when ``root`` is not an artifacts root (:func:`load_runs`)."""
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
        from benchcert.tasks.artifacts.runs import read_index

        entries = read_index(root)["benchmarks"]
    if not isinstance(entries, list):
        raise DashboardError(f"{index_path}: no 'benchmarks' list; not a benchcert index")
    return Listing(root, index_path, entries)


def read_listed(listing: Listing, *, cache=None, pick=None) -> tuple[list[tuple[tuple[int, int], RunRecord]],
                                                                     list[tuple[tuple[int, int], str]]]:
    """The runs of ``listing`` (of the benchmarks ``pick(benchmark)`` accepts; ``pick(None)`` for an entry without
    a benchmark name) and the problems, each with its place in the listing (entry, run): the runs and problems of
    several such reads, merged in that order, are one read's (the cold build's shares, tasks/render/dashboard.py)."""
    root, index_path = listing.root, listing.index_path
    runs, problems, seen = [], [], set()
    for e, entry in enumerate(listing.entries):
        if pick is not None and not pick(entry.get("benchmark") if isinstance(entry, dict)
                                         and isinstance(entry.get("benchmark"), str) else None):
            continue
        try:
            benchmark = _need(entry, "benchmark", str, str(index_path))
            folder = _need(entry, "dir", str, str(index_path))
            # index.json is data too: its folder must be a plain child of the root.
            if folder not in folder_candidates(benchmark):
                raise _Skip(f"{index_path}: benchmark {benchmark!r} has an unsafe folder {folder!r} (its own "
                            f"is {benchmark_folder(root, benchmark)!r})")
            bench_dir = inside(root, folder)
            run_ids = _need(entry, "runs", list, str(index_path))
        except (_Skip, ValueError) as exc:
            problems.append(((e, -1), str(exc)))
            continue
        for k, run_id in enumerate(run_ids):
            try:
                if not isinstance(run_id, str) or not run_id:
                    raise _Skip(f"{index_path}: bad run id {run_id!r} for benchmark {benchmark!r}")
                if (benchmark, safe_component(run_id)) in seen:
                    raise _Skip(f"{index_path}: run {run_id!r} of {benchmark!r} is listed twice")
                seen.add((benchmark, safe_component(run_id)))
                run_dir = _run_folder(bench_dir, safe_component(run_id))
                if cache is None:
                    runs.append(((e, k), _parse_run(root, run_dir, benchmark, run_id)))
                    continue
                key, record = cache.get(benchmark, run_id, run_dir)
                if record is None:
                    record = _parse_run(root, run_dir, benchmark, run_id)
                    cache.put(key, record)
                runs.append(((e, k), record))
            except (_Skip, ValueError) as exc:
                problems.append(((e, k), str(exc)))
    return runs, problems


def sort_runs(runs: list[RunRecord]) -> list[RunRecord]:
    """The runs in the dashboard's order: by benchmark, oldest first."""
    return sorted(runs, key=lambda r: (r.benchmark, r.finished_at, r.run_id))


# --------------------------------------------------------------------------- trends


def headline_order(models) -> list:
    """The one order of models on every page, chart and table: by the headline's pooled score, best first,
    ties by name (the report uses the same rule, tasks/audit/results.py ``model_order``)."""
    return sorted(models, key=lambda m: (-m.estimates["pooled"], m.model))


def choose_method(run: RunRecord, methods=DEFAULT_METHODS) -> str | None:
    """The first of ``methods`` that gives a macro interval for some model of ``run``, or None."""
    present = {method for (metric, method) in (k for m in run.models for k in m.intervals) if metric == "macro"}
    return next((m for m in methods if m in present), None)


def score_interval(m: ModelScore, metric: str, method: str | None) -> tuple[float | None, float | None]:
    """``method``'s interval of a score (None, None when absent); a run from before the headline (summary
    1.2) gives its hierarchical interval, its headline then."""
    if method is None:
        return None, None
    if method == "headline" and (metric, method) not in m.intervals:
        method = "hierarchical"
    return m.intervals.get((metric, method), (None, None))


def method_label(run: RunRecord, method: str | None, metric: str = "macro") -> str:
    """How a column of intervals is named: the method, or for the headline the question it answers."""
    if method != "headline":
        return method or "no interval"
    from benchcert.tasks.audit.headline import QUESTIONS

    question = next((m.questions[metric] for m in run.models if metric in m.questions), "new_subjects")
    return f"headline: {QUESTIONS.get(question, question)}"


def trend_rows(runs: list[RunRecord], method: str | None) -> list[dict]:
    """One benchmark's trend: a row per (model, run, metric), the runs oldest first, each row a dict of
    ``benchmark``, ``family``, ``checkpoint``, ``model``, ``run_id``, ``finished_at``, ``run_order``, ``metric``,
    ``estimate``, ``method``, ``lower``, ``upper`` and ``alpha``.

    ``method`` is the benchmark's interval method (:func:`choose_method` on its latest run); ``lower``/``upper``
    are None where a run lacks that method (drawn as a point without bar).  ``run_order`` is 0 for the oldest run.
    Plain rows, not a data frame: a benchmark's page is rendered from them in whichever process wrote its runs
    (tasks/render/dashboard.py), and polars' thread pool does not survive a fork.
    """
    out = []
    add = out.append
    for order, run in enumerate(sorted(runs, key=lambda r: (r.finished_at, r.run_id))):
        for m in run.models:
            family, checkpoint = split_checkpoint(m.model)
            for metric in METRICS:
                lo, hi = score_interval(m, metric, method)
                add({"benchmark": run.benchmark, "family": family, "checkpoint": checkpoint, "model": m.model,
                     "run_id": run.run_id, "finished_at": run.finished_at, "run_order": order, "metric": metric,
                     "estimate": m.estimates[metric], "method": method, "lower": lo, "upper": hi,
                     "alpha": run.alpha})
    return out


def checkpoint_rows(rows: list[dict]) -> list[dict]:
    """Of one benchmark's :func:`trend_rows`, each checkpointed family's members' rows from the latest run that
    has the member, ordered by family, then checkpoint in natural order (the family's own id first), then metric.

    Only families with at least one checkpoint id (``@``) appear.
    """
    fams = {r["family"] for r in rows if r["checkpoint"] is not None}
    latest: dict[str, int] = {}
    for r in rows:
        if r["family"] in fams and latest.get(r["model"], -1) < r["run_order"]:
            latest[r["model"]] = r["run_order"]
    return sorted((r for r in rows if r["family"] in fams and r["run_order"] == latest[r["model"]]),
                  key=lambda r: (r["family"], checkpoint_key(r["checkpoint"]), r["metric"]))
