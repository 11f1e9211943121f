"""The ops dashboard: a static, offline site built from run artifacts, and a loopback server.

It reads only the artifact contract (``<root>/index.json`` and each run's ``manifest.json``,
``summary.json`` and ``report.html``), never the live DuckDB store, so it can be rebuilt
while audits are writing and on any machine that can read the artifacts.

Site layout (a benchmark's folder is its artifacts folder, :func:`site_folders`; a run's is
:func:`~benchcert.tasks.artifacts.folders.safe_component` of its id, so nothing a log says can leave
the site folder)::

    <out>/index.html                           overview: benchmarks with their latest run, regressions
                                               since the previous run, open checkpoint verdicts, stale
                                               benchmarks, training runs, the latest runs
    <out>/_views/checkpoints.html              checkpoint grid: benchmarks x checkpoints, each cell the
                                               verdict against the baseline (site_views.grid_page)
    <out>/_views/models.html, model-<m>.html   one model across every benchmark (site_views.model_page)
    <out>/_views/series-<family>.html          a training run: each benchmark's score along the steps
                                               (_views: no benchmark's folder starts with "_")
    <out>/<benchmark>/index.html               the headline first, then trends: each model's pooled and
                                               macro score with its interval across runs, and across
                                               the checkpoints of a model family
    <out>/<benchmark>/<run id>/index.html      one run: verdicts, models, changes, warnings, sources
    <out>/<benchmark>/<run id>/report.html     the run's own report (hard-linked, else copied), in a frame
    <out>/<benchmark>/<run id>/{summary,manifest}.json  the same, for download
    <out>/.benchcert-site.json                 what each run's folder was rendered from (site_cache; a
                                               dotfile, never served)
    <out>/.benchcert-records.json              each run's record as read, so a rebuild reads only new and
                                               changed runs (record_cache; a dotfile, never served)

Safety rules:

* every string that comes from an artifact (model, benchmark, subject names, warnings, paths,
  run ids) is escaped with :func:`~benchcert.tasks.render.escape.escape`; markup built here is
  wrapped in :class:`~benchcert.tasks.render.site_html.Html` so a table cell is either known-safe markup or escaped text, never
  "probably fine";
* no script, no external URL, no web font: each page carries a Content-Security-Policy meta
  tag (:data:`SITE_CSP`) that forbids every fetch except same-origin frames (the embedded
  report, itself sandboxed without scripts), and :func:`serve` sends the same policy as a header;
* a first or full build assembles the site in a hidden sibling folder and swaps it into place under a
  lock; a rebuild updates the site in place under the same lock (each page replaced in one rename, a
  new run's folder assembled aside and renamed in, unchanged runs' folders left as they are,
  :mod:`benchcert.tasks.render.site_cache`); an existing ``--out`` folder is only written to if an
  earlier build marked it as a dashboard.

The runs and the trend tables are read by :mod:`benchcert.tasks.render.run_records`; the pages are
:mod:`benchcert.tasks.render.site_run` (run, benchmark) and :mod:`benchcert.tasks.render.site_views`
(overview, model, training run, grid), in one look (:mod:`benchcert.tasks.render.site_html`); the
charts are drawn by :mod:`benchcert.tasks.render.charts`, :mod:`benchcert.tasks.render.trend` and
:mod:`benchcert.tasks.render.series_chart`.
"""

from __future__ import annotations

import datetime as dt
import functools
import gc
import os
import shutil
import socket
import stat
import threading
import uuid
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import orjson
from filelock import FileLock

from benchcert.tasks.artifacts.folders import (folder_candidates, folder_name, hashed_folder, inside, is_plain_folder,
                                              safe_component)

from benchcert.tasks.artifacts.runs import iso
from benchcert.tasks.atomic_write import write_text_atomic
from benchcert.tasks.artifacts.suites import read_suite_verdicts
from benchcert.tasks.errors import UsageError
from benchcert.tasks.render.escape import escape
from benchcert.tasks.render.run_records import (DEFAULT_METHODS, DashboardError, RunRecord, choose_method, load_runs,
                                                read_listed, read_listing, sort_runs)
from benchcert.tasks.render.record_cache import RECORDS_FILE, RecordCache
from benchcert.tasks.render.site_cache import SITE_MANIFEST, SiteCache
from benchcert.tasks.render.site_fork import Child, finish, finish_quietly, fork_shares, fork_workers, shares
from benchcert.tasks.render.site_html import SITE_CSP, href as _href
from benchcert.tasks.render.site_run import bench_page, run_page
from benchcert.tasks.render.site_views import (GRID_PATH, MODELS_PATH, VIEWS, grid_page, model_page, model_path,
                                               model_runs, models_index_page, overview_page, series_page, series_path,
                                               site_data)

__all__ = [
    "SITE_CSP",
    "MARKER",
    "OutputFolderError",
    "SiteReport",
    "build_site",
    "make_server",
    # read by the command line from here, defined in run_records
    "DEFAULT_METHODS",
    "DashboardError",
]

#: File that marks a folder as built by :func:`build_site` (so a rebuild may replace it).
MARKER = ".benchcert-dashboard"



class OutputFolderError(UsageError, DashboardError):
    """The --out folder cannot be used (not a dashboard, or inside the artifacts root): the option's
    mistake, so UsageError comes first and gives the exit code (2); still a DashboardError."""


# --------------------------------------------------------------------------- build


@dataclass(frozen=True)
class SiteReport:
    out: Path
    benchmarks: int
    runs: int
    pages: int
    problems: tuple[str, ...]
    #: Run pages taken over from the previous site unchanged (site_cache): 0 for a cold or full build.
    reused: int = 0


def _copy_inside(root: Path, src: Path, dst: Path) -> bool:
    """Put the run file ``src`` into the site at ``dst``: a hard link when the two are on one filesystem (a run
    directory is never changed once published, so the site and the artifacts share the bytes), else a copy.

    ``src``'s folder was resolved inside ``root`` when the run was read (run_records.load_runs); a regular
    file there is inside too, and a symlink is followed only when it resolves inside ``root``.
    """
    try:
        mode = os.lstat(src).st_mode
    except OSError:
        return False
    if not stat.S_ISREG(mode):
        try:
            src = inside(root, str(src.relative_to(root)))
        except ValueError:
            return False
        if not src.is_file():
            return False
    try:
        os.link(src, dst)
    except OSError:  # another filesystem, or links not allowed: copy
        shutil.copyfile(src, dst)
    return True


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise OutputFolderError(f"{out} exists and is not a benchcert dashboard; refusing to replace it "
                             "(choose an empty or new --out folder)")



def site_folders(by_bench: dict[str, list[RunRecord]]) -> dict[str, str]:
    """Each benchmark's folder in the site: its artifacts folder (so links keep their address),
    or its hashed :func:`~benchcert.tasks.artifacts.folders.folder_name` where that folder is not
    one of its own or would fold onto another benchmark's (an old tree holding both ``Case/``
    and ``case/``): no two benchmarks share a site folder on any filesystem."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for bench in sorted(by_bench):
        folder = by_bench[bench][-1].run_dir.parent.name
        if folder not in folder_candidates(bench) or folder.casefold() in taken:
            folder = folder_name(bench)
            if folder.casefold() in taken:
                folder = hashed_folder(bench)
        taken.add(folder.casefold())
        out[bench] = folder
    return out

def _folders_split_safely(listing) -> bool:
    """Whether shares of the benchmarks can each choose their site folders (:func:`site_folders`) without meeting:
    no two entries' folders fold to one name, each entry's folder is one of its benchmark's own, and no two plain
    benchmark names fold to one (one's folder resolved through a link could take the other's plain name).

    Otherwise only the whole build decides which benchmark keeps a folder (an old tree holding ``Case/`` and
    ``case/``): shares choosing independently would both make theirs, which a case-insensitive disk refuses
    (FileExistsError) before :func:`_split_build`'s own check could see it, so the build runs in one process."""
    dirs: dict[str, str] = {}  # folded name -> the benchmark whose it is (one benchmark's entries share a share)
    plain: dict[str, str] = {}
    for entry in listing.entries:
        if not isinstance(entry, dict):
            continue
        bench, folder = entry.get("benchmark"), entry.get("dir")
        if not isinstance(bench, str) or not isinstance(folder, str) or not bench:
            continue  # skipped by the reading, a problem in either build
        if folder not in folder_candidates(bench) or dirs.setdefault(folder.casefold(), bench) != bench:
            return False
        if is_plain_folder(bench) and plain.setdefault(bench.casefold(), bench) != bench:
            return False
    return True


def _gc_paused(build):
    """Run ``build`` with the cyclic garbage collector paused (its previous state restored after).

    A build holds every run's record (10,000 runs: millions of small objects, none of them cyclic garbage), and
    each full collection walked all of them: a quarter of a 20 x 200 rebuild's CPU time (issue #37).  What a
    build frees is freed by reference counting; the collector is paused for the build only, for the whole
    process (other threads' cycles wait until it ends)."""

    @functools.wraps(build)
    def paused(*args, **kwargs):
        was = gc.isenabled()
        gc.disable()
        try:
            return build(*args, **kwargs)
        finally:
            if was:
                gc.enable()

    return paused


@_gc_paused
def build_site(artifacts_root: str | os.PathLike, out_dir: str | os.PathLike, *, methods=DEFAULT_METHODS,
               max_trend_runs: int = 90, now: dt.datetime | None = None, stale_days: int = 7,
               full: bool = False, processes: int | None = None) -> SiteReport:
    """Build the static dashboard of ``artifacts_root`` into ``out_dir`` and return what was built.

    ``out_dir`` is written only when empty or built by an earlier call.  Runs that cannot be read are listed on the index page
    and in :attr:`SiteReport.problems`, and the rest is built.  A benchmark whose latest run
    finished more than ``stale_days`` days before ``now`` is listed as stale on the overview.

    The build is incremental (:mod:`~benchcert.tasks.render.site_cache`): a site in ``out_dir`` with a readable
    manifest is updated in place under the lock: a run whose files and page inputs are unchanged keeps its
    folder, new and changed runs' folders are assembled aside and renamed in, every cross-run page replaces its
    file atomically (a server sees the old or the new page), and what is no longer listed is removed last.
    ``full=True`` (or no usable manifest: the first build, a corrupt one, another benchcert version) renders
    every page into a hidden sibling of ``out_dir`` swapped into place under the lock (a server on ``out_dir``
    sees the old or the new site).  A cold build of 2,000 runs or more, in a process running no other thread, is
    shared among ``processes`` forked processes (None: two, or one on a single core; 1: this process alone;
    :func:`_split_build`): the same site, about the same CPU seconds, less wall time.
    """
    if max_trend_runs < 1:
        raise UsageError(f"max_trend_runs must be >= 1; got {max_trend_runs!r}")
    if stale_days < 0:
        raise UsageError(f"stale_days must be >= 0; got {stale_days!r}")
    if processes is not None and processes < 1:
        raise UsageError(f"processes must be >= 1; got {processes!r}")
    root, out = Path(artifacts_root).resolve(), Path(out_dir)
    if out.resolve() == root.resolve() or root.resolve() in out.resolve().parents:
        raise OutputFolderError(f"--out {out} must not be inside the artifacts root {root}")
    _check_out(out)
    # The records of runs read by an earlier build of this site (tasks/render/record_cache.py): only new and
    # changed runs are read.  The file is replaced whole, so a build running beside this one is no matter.
    records = RecordCache(out if out.is_dir() else None, full=full)
    listing = read_listing(root)
    now = now or dt.datetime.now(dt.timezone.utc)
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(out.parent / f".{out.name}.lock"), timeout=600)
    counts = listing.run_counts()
    workers = fork_workers(sum(counts.values()), processes)
    if workers > 1 and (full or not (out.is_dir() and SiteCache(out).usable)) and _folders_split_safely(listing):
        split = _split_build(listing, counts, out, lock, records, workers, (methods, now, stale_days, max_trend_runs))
        if split is not None:
            return split
        records = RecordCache(out if out.is_dir() else None, full=full)  # what the split read is not kept
    runs, problems = load_runs(root, cache=records, listing=listing)
    suites, suite_problems = read_suite_verdicts(root)
    problems += suite_problems
    by_bench = _by_bench(runs)
    data = site_data(by_bench, site_folders(by_bench), methods, iso(now), now, stale_days, problems, suites)

    def report(pages: int, cache: SiteCache) -> SiteReport:
        return SiteReport(out=out, benchmarks=len(by_bench), runs=len(runs), pages=pages,
                          problems=tuple(problems), reused=cache.kept)

    if not full and out.is_dir():
        with lock:
            _check_out(out)
            cache = SiteCache(out)
            if cache.usable:
                pages = _write_benchmarks(root, out, data, max_trend_runs, (cache, records), in_place=True)
                _prune(out, data, cache)
                records.write(out)
                cache.write(out)
                return report(pages, cache)
    cache = SiteCache(None)
    tmp = _new_site(out)
    try:
        pages = _write_benchmarks(root, tmp, data, max_trend_runs, (cache, records), in_place=False)
        _publish(tmp, out, lock, records, cache)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return report(pages, cache)


def _by_bench(runs: list[RunRecord]) -> dict[str, list[RunRecord]]:
    by_bench: dict[str, list[RunRecord]] = {}
    for r in runs:
        by_bench.setdefault(r.benchmark, []).append(r)
    return by_bench


def _new_site(out: Path) -> Path:
    """A hidden sibling of ``out`` a cold build writes into, marked as a dashboard."""
    tmp = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    (tmp / MARKER).write_text("built by benchcert dashboard build\n", encoding="utf-8")
    return tmp


def _publish(tmp: Path, out: Path, lock: FileLock, records: RecordCache, cache: SiteCache) -> None:
    """Write the kept records and the site manifest into ``tmp`` and swap it in at ``out`` under the lock."""
    records.write(tmp)
    cache.write(tmp)
    with lock:
        _check_out(out)
        old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)


#: A cold build in several processes: what this (the parent) process's own work costs, as a share of the runs'
#: reading and writing: it takes the children's records and renders the cross-run pages, which need every run's
#: record (issue #37, measured at 50 benchmarks x 200 runs: docs/scale.md).
PARENT_LOAD = 0.25


def _split_build(listing, counts: dict[str, int], out: Path, lock: FileLock, records: RecordCache, workers: int,
                 ctx) -> SiteReport | None:
    """A cold build in ``workers`` processes, the same site as one process's (tests/tasks/render/
    test_dashboard_fork.py), for a listing whose shares cannot meet in their site folders
    (:func:`_folders_split_safely`); None, the caller then building in one process, when the shares still chose
    folders other than the whole build's (a defence: only the whole build decides who keeps a folder).

    The benchmarks are shared among this process and ``workers - 1`` forked before any run is read
    (tasks/render/site_fork.py).  Each reads its benchmarks' runs, and a child writes their records
    (record_cache's compact form) and its problems to a file in the new site and says so; each then writes its
    benchmarks' run folders and pages.  This process then takes the children's records (decoding a record costs
    about a quarter of parsing its summary) and renders the cross-run pages, which need every run.  No polars
    runs before the forks or in a child (its thread pool does not survive a fork).  Everything is recorded in the
    one-process build's order: the runs, the problems, the kept records and the site manifest."""
    methods, now, stale_days, max_trend_runs = ctx
    root, generated = listing.root, iso(now)  # counts: listing.run_counts()
    benches = sorted(counts)
    split = shares([counts[b] for b in benches], workers, int(PARENT_LOAD * sum(counts.values())))
    parts = [(i, [benches[j] for j in share]) for i, share in enumerate(split) if share or i == 0]
    theirs = {b for _, part in parts[1:] for b in part}
    tmp = _new_site(out)
    children: list[Child] = []

    def read_share(pick):
        """The share's runs (with their places), problems and site data (its benchmarks' folders made)."""
        visited, problems = read_listed(listing, cache=records, pick=pick)
        by_bench = _by_bench(sort_runs([r for _, r in visited]))
        data = site_data(by_bench, site_folders(by_bench), methods, generated, now, stale_days, [], [])
        return visited, problems, data, {b: _bench_folder(tmp, data.bench_dir[b], False) for b in by_bench}

    def write_share(data, bdirs) -> dict[str, tuple[int, dict]]:
        """Each benchmark's run folders and page: the pages written and the site manifest's entries."""
        out = {}
        for bench in data.by_bench:
            mine = SiteCache(None)
            n = _write_runs(root, bdirs[bench], data, bench, (mine, records), in_place=False)
            out[bench] = (n + _write_bench_page(bdirs[bench], data, bench, max_trend_runs, False), mine.new)
        return out

    def child(job: tuple[int, list[str]], signal) -> dict:
        visited, problems, data, bdirs = read_share(set(job[1]).__contains__)
        (tmp / f".share-{job[0]}.json").write_bytes(orjson.dumps([
            [[pos, r.benchmark, r.run_id, str(r.run_dir), records.kept(r)] for pos, r in visited], problems,
            data.bench_dir]))
        signal()
        return write_share(data, bdirs)

    try:
        children = fork_shares(parts[1:], child)
        visited, problems, data, bdirs = read_share(lambda b: b not in theirs)
        written = write_share(data, bdirs)
        folders = dict(data.bench_dir)
        for (i, _), kid in zip(parts[1:], children):
            kid.ready()
            path = tmp / f".share-{i}.json"
            their_runs, their_problems, their_folders = orjson.loads(path.read_bytes())
            path.unlink()
            visited += [(tuple(pos), records.take(bench, run_id, Path(run_dir), entry))
                        for pos, bench, run_id, run_dir, entry in their_runs]
            problems += [(tuple(pos), text) for pos, text in their_problems]
            folders.update(their_folders)
        visited.sort(key=lambda x: x[0])
        records.order([r for _, r in visited])
        runs = sort_runs([r for _, r in visited])
        by_bench = _by_bench(runs)
        if site_folders(by_bench) != folders:
            finish(children)
            shutil.rmtree(tmp, ignore_errors=True)
            return None
        suites, suite_problems = read_suite_verdicts(root)
        problems = [text for _, text in sorted(problems, key=lambda x: x[0])] + suite_problems
        data = site_data(by_bench, folders, methods, generated, now, stale_days, problems, suites)
        pages = _write_views(tmp, data, root, in_place=False)
        for result in finish(children):
            written.update(result)
        cache = SiteCache(None)
        for bench in by_bench:  # the site manifest in the one-process build's order
            pages += written[bench][0]
            cache.new.update(written[bench][1])
        _publish(tmp, out, lock, records, cache)
    except BaseException:
        finish_quietly(children)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return SiteReport(out=out, benchmarks=len(by_bench), runs=len(runs), pages=pages, problems=tuple(problems))


def _write_page(path: Path, text: str, in_place: bool) -> None:
    """A page of a new folder is written; one of the live site replaces the old file in one rename."""
    if in_place:
        write_text_atomic(path, text, private=False)
    else:
        path.write_text(text, encoding="utf-8")


def _remove(path: Path) -> None:
    """Remove a file, a link (not what it points to) or a folder of the site."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _swap_in(new: Path, dest: Path) -> None:
    """Put the folder ``new`` (assembled aside) at ``dest``: two renames, then the old one is removed."""
    gone = dest.with_name(f".{dest.name}.gone-{uuid.uuid4().hex[:8]}")
    if os.path.lexists(dest):
        os.replace(dest, gone)
    os.replace(new, dest)
    if os.path.lexists(gone):
        _remove(gone)


def _write_benchmarks(root: Path, site: Path, data, max_trend_runs: int, caches: tuple[SiteCache, RecordCache], *,
                      in_place: bool) -> int:
    """Each benchmark's page and its runs' pages (with their report and JSON files), then the cross-run pages
    (:func:`_write_views`).  In place (``site`` is the live site), a run the cache says is unchanged keeps its
    folder, and the others are assembled aside (a cold build in several processes: :func:`_split_build`)."""
    benches = list(data.by_bench)
    bdirs = {bench: _bench_folder(site, data.bench_dir[bench], in_place) for bench in benches}
    pages = 0
    for bench in benches:
        pages += _write_runs(root, bdirs[bench], data, bench, caches, in_place=in_place)
        pages += _write_bench_page(bdirs[bench], data, bench, max_trend_runs, in_place)
    return pages + _write_views(site, data, root, in_place=in_place)


def _bench_folder(site: Path, folder: str, in_place: bool) -> Path:
    """The benchmark's folder in the site, made (``folder``: site_folders' one plain name, no separator or "..");
    a link or file of that name is replaced."""
    bdir = site / folder
    if bdir.is_symlink() or (bdir.exists() and not bdir.is_dir()):
        _remove(bdir)
    bdir.mkdir(exist_ok=in_place)
    return bdir


def _write_runs(root: Path, bdir: Path, data, bench: str, caches: tuple[SiteCache, RecordCache], *,
                in_place: bool) -> int:
    """One benchmark's runs' folders, kept or written (:func:`_write_benchmarks`); the pages it counts."""
    cache, records = caches
    bruns = data.by_bench[bench]
    method = choose_method(bruns[-1], data.methods)
    with os.scandir(bdir) as it:
        folders = {e.name for e in it if e.is_dir(follow_symlinks=False)}
    siblings = {r.run_id for r in bruns}
    for run in bruns:
        # safe_component gives one plain name, and bdir is a real folder: the join stays inside without
        # resolving 10,000 paths.
        rel = (bdir.name, safe_component(run.run_id))
        rdir = bdir / rel[1]
        prev = (run.changes or {}).get("previous_run_id")
        # What the page reads: the run's files, the benchmark's method and whether its previous run is linked.
        key = [method, isinstance(prev, str) and prev in siblings, records.source_key(run)]
        if rel[1] in folders and cache.keep(rel, key, rdir):
            continue
        target = bdir / f".{rel[1]}.new-{uuid.uuid4().hex[:8]}" if in_place else rdir
        target.mkdir()
        cache.record(rel, key, _write_run(root, target, run, method, data.generated, siblings,
                                          data.run_views[id(run)]))
        if in_place:
            _swap_in(target, rdir)
    return len(bruns)


def _write_bench_page(bdir: Path, data, bench: str, max_trend_runs: int, in_place: bool) -> int:
    bruns = data.by_bench[bench]
    run_href = {r.run_id: _href(safe_component(r.run_id)) + "/index.html" for r in bruns}
    _write_page(bdir / "index.html", bench_page(bench, bruns, choose_method(bruns[-1], data.methods),
                                                run_href, data.generated, max_trend_runs,
                                                data.verdicts.get(bench, [])), in_place)
    return 1


def _write_run(root: Path, rdir: Path, run: RunRecord, method, generated: str, siblings: set[str],
               views: list) -> bool:
    """One run's folder: its files (linked or copied) and its page (``views``: its verdicts' views, site_data's);
    True when it has a report."""
    has_report = _copy_inside(root, run.run_dir / "report.html", rdir / "report.html")
    for name in ("summary.json", "manifest.json"):
        _copy_inside(root, run.run_dir / name, rdir / name)
    (rdir / "index.html").write_text(run_page(run, method, "index.html", generated, has_report, siblings, views),
                                     encoding="utf-8")
    return has_report


def _write_views(site: Path, data, root: Path, *, in_place: bool) -> int:
    """The checkpoint grid, the model pages and the training-run pages (in place: into a folder assembled aside
    and swapped in), then the overview."""
    views = site / (f".{VIEWS}.new-{uuid.uuid4().hex[:8]}" if in_place else VIEWS)
    views.mkdir()

    def put(path: str, text: str) -> None:  # path is "_views/<safe name>"
        inside(views, *path.split("/")[1:]).write_text(text, encoding="utf-8")

    put(GRID_PATH, grid_page(data))
    per_model = model_runs(data)
    put(MODELS_PATH, models_index_page(data, per_model))
    for model, benches in per_model.items():
        put(model_path(model), model_page(data, model, benches))
    for family in data.families:
        put(series_path(family), series_page(data, family))
    if in_place:
        _swap_in(views, site / VIEWS)
    _write_page(site / "index.html", overview_page(data, root), in_place)
    return 3 + len(per_model) + len(data.families)


def _prune(site: Path, data, cache: SiteCache) -> None:
    """Remove from the live site what this build did not write: runs no longer listed, benchmarks gone, files
    left by others or by a build that stopped half-way (the cross-run pages no longer link to any of them)."""
    keep = {MARKER, SITE_MANIFEST, RECORDS_FILE, "index.html", VIEWS} | set(data.bench_dir.values())
    runs: dict[str, set[str]] = {}
    for rel in cache.new:
        folder, run = rel.split("/")
        runs.setdefault(folder, {"index.html"}).add(run)
    with os.scandir(site) as it:
        entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    for name, is_dir in entries:
        if name not in keep:
            _remove(site / name)
        elif is_dir and name in runs:
            with os.scandir(site / name) as it:
                stale = [e.name for e in it if e.name not in runs[name]]
            for n in stale:
                _remove(site / name / n)


# --------------------------------------------------------------------------- serve


class _SiteHandler(SimpleHTTPRequestHandler):
    """GET/HEAD of files inside the site folder only: no listings, no dotfiles, no symlinks out."""

    server_version = "benchcert-dashboard"
    sys_version = ""
    quiet = False
    #: Seconds a connection may sit idle (nothing sent) before it is closed, so half-open or
    #: slow clients cannot hold threads forever.
    timeout = 20.0
    #: Seconds from the start of a request until its headers must all have arrived: the idle
    #: timeout restarts with every byte, so a client trickling one byte at a time is cut here.
    header_deadline = 10.0

    def handle_one_request(self):
        lock = threading.Lock()
        self._headers_read, self._cut = False, False

        def cut() -> None:
            with lock:
                if self._headers_read:
                    return
                self._cut = True  # the headers are still arriving: end the connection
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        self._cut_lock = lock
        timer = threading.Timer(self.header_deadline, cut)
        timer.daemon = True
        timer.start()
        try:
            super().handle_one_request()
        except OSError:
            # Writing to the connection cut (an error page for the partial request) fails: that
            # was a traceback per cut connection (issue #39), and it is no error of the server's.
            if not self._cut:
                raise
        finally:
            timer.cancel()
        if self._cut:
            self.close_connection = True
            if not self.quiet:
                # The base class's: this class's log_message is silent for a cut request, whose
                # partial request line and error page (never sent) would be logged as answered.
                super().log_message("connection cut: request headers not complete after %g s; no response",
                                    self.header_deadline)

    def parse_request(self):
        # A request cut before its headers are complete is not answered: reading the stream the cut
        # ended would see a complete request and answer it into a closed socket.
        ok = not self._cut and super().parse_request()  # reads the headers
        with self._cut_lock:
            self._headers_read = True
        return ok and not self._cut

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
        if not self.quiet and not getattr(self, "_cut", False):
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
                quiet: bool = False, idle_timeout: float = 20.0, max_connections: int = 64,
                header_deadline: float = 10.0) -> ThreadingHTTPServer:
    """An HTTP server for a built site (call ``serve_forever``); port 0 picks a free port.

    A connection idle for ``idle_timeout`` seconds (no request line, or a request sent too
    slowly) is closed, a request whose line and headers have not all arrived within
    ``header_deadline`` seconds of its start is closed whatever trickles in, and at most
    ``max_connections`` are served at once (more are closed on arrival), so half-open, slow
    or trickling clients cannot pile up threads or hold a slot.

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
    if not header_deadline > 0:
        raise ValueError(f"header_deadline must be > 0; got {header_deadline!r}")
    if not max_connections >= 1:
        raise ValueError(f"max_connections must be >= 1; got {max_connections!r}")
    handler = type("Handler", (_SiteHandler,), {"quiet": quiet, "timeout": float(idle_timeout),
                                                  "header_deadline": float(header_deadline)})
    server_cls = type("Server", (_BoundedServer,), {"max_connections": int(max_connections)})
    return server_cls((host, port), lambda *a, **k: handler(*a, directory=str(directory), **k))
