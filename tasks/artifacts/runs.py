"""Run artifacts on disk: atomic run directories and index.json (their folder names: folders.py).

Layout (the contract dashboards read)::

    <root>/<benchmark folder>/<run id>/{manifest.json, summary.json, tables/*.parquet, report.html}
    <root>/index.json

A run directory is assembled in a hidden sibling (:func:`stage_run`) and renamed into place
(:func:`publish_run`) only after the run is recorded in the store's catalog, so a reader sees
it complete or not at all, and never a run the catalog does not know.  A staging folder is
locked (``flock``) by the process writing it; one whose writer died is stale and is finished
or removed by the next audit (:func:`recover_stale`).  index.json is rebuilt from the run
directories on disk (under a lock, replaced atomically), so two runs finishing at once cannot
lose each other's entry, and a missing or damaged index is rebuilt by its readers.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import shutil
import time
import uuid
from pathlib import Path

import polars as pl
from filelock import FileLock

from benchcert.tasks.errors import is_disk_full
from benchcert.tasks.schemas import Index, IndexEntry, Manifest, Summary
from benchcert.tasks.artifacts.folders import benchmark_folder, folder_candidates, inside, safe_component

_LOCK = ".lock"
_TMP = ".tmp-"
#: A staging folder without a lock file (its writer died before taking it) is stale after this.
_UNLOCKED_GRACE_S = 60.0


def new_run_id(now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    return now.strftime("%Y%m%dT%H%M%S") + f"{now.microsecond // 1000:03d}Z-" + uuid.uuid4().hex[:6]


def iso(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@contextlib.contextmanager
def _writing(path: Path):
    """A full disk while writing ``path`` is an OSError(ENOSPC) naming it.

    A failed write() carries no file name, and a Parquet writer's message none either: the
    user was told the disk was full but not where (issue #39).
    """
    try:
        yield
    except Exception as exc:
        if not is_disk_full(exc) or getattr(exc, "filename", None):
            raise
        detail = " ".join(str(exc).split())[:300]
        raise OSError(errno.ENOSPC, f"No space left on device ({detail})", str(path)) from exc


def _write_json(path: Path, model) -> None:
    with _writing(path):
        path.write_text(model.model_dump_json(indent=2) + "\n", encoding="utf-8")


def run_dir_of(root: str | os.PathLike, benchmark: str, run_id: str) -> Path:
    """Where the run directory of ``run_id`` is published."""
    return inside(Path(root), benchmark_folder(root, benchmark), safe_component(run_id))


#: Lock files of the staging folders this process is writing (fd by folder), released on publish.
_HELD: dict[Path, int] = {}


def _take(tmp: Path) -> None:
    fd = os.open(tmp / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a fresh folder: nobody else holds it
    _HELD[tmp] = fd


def _release(tmp: Path) -> None:
    fd = _HELD.pop(tmp, None)
    if fd is not None:
        os.close(fd)


def stage_run(root: str | os.PathLike, *, summary: Summary, manifest_fields: dict,
              tables: dict[str, pl.DataFrame], report_html: str) -> Path:
    """Write one run's files into a hidden, locked staging folder; returns it (see :func:`publish_run`).

    Idempotent: a retry rewrites the folder.  Nothing is visible to readers until published.
    """
    root = Path(root)
    bench_dir = inside(root, benchmark_folder(root, summary.benchmark))
    bench_dir.mkdir(parents=True, exist_ok=True)
    final = inside(bench_dir, safe_component(summary.run_id))
    if final.exists():
        raise FileExistsError(f"run directory {final} already exists (run ids are unique: another "
                              "process wrote this run)")
    tmp = inside(bench_dir, f"{_TMP}{safe_component(summary.run_id)}")
    _release(tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "tables").mkdir(parents=True)
    _take(tmp)
    try:
        table_refs = []
        for name, frame in tables.items():
            rel = f"tables/{safe_component(name)}.parquet"
            with _writing(tmp / rel):
                frame.write_parquet(tmp / rel)
            table_refs.append({"name": name, "file": rel, "rows": frame.height, "columns": frame.columns})
        with _writing(tmp / "report.html"):
            (tmp / "report.html").write_text(report_html, encoding="utf-8")
        _write_json(tmp / "summary.json", summary)
        files = sorted(["manifest.json", "summary.json", "report.html"] + [t["file"] for t in table_refs])
        manifest = Manifest(tables=table_refs, files=files, **manifest_fields)
        _write_json(tmp / "manifest.json", manifest)
    except BaseException:
        discard_run(tmp)
        raise
    return tmp


def discard_run(staged: str | os.PathLike) -> None:
    """Remove a staging folder (the run was not recorded)."""
    staged = Path(staged)
    _release(staged)
    shutil.rmtree(staged, ignore_errors=True)


def publish_run(root: str | os.PathLike, staged: str | os.PathLike) -> Path:
    """Rename a staged run into place and refresh index.json; returns the run directory.

    Call it only after the run is recorded in the catalog.  Idempotent: a run already in
    place is only re-indexed.
    """
    root, staged = Path(root), Path(staged)
    final = staged.with_name(staged.name[len(_TMP):])
    if staged.is_dir():
        if final.exists():
            raise FileExistsError(f"run directory {final} already exists")
        try:
            (staged / _LOCK).unlink(missing_ok=True)
            os.replace(staged, final)
        finally:
            _release(staged)
    elif not final.is_dir():
        raise FileNotFoundError(f"neither {staged} nor {final} exists: nothing to publish")
    refresh_index(root)
    return final


def unpublish_run(root: str | os.PathLike, run_dir: str | os.PathLike) -> None:
    """Take a run directory back out (its publication failed half-way) and re-index; never raises."""
    try:
        if Path(run_dir).is_dir():
            shutil.rmtree(run_dir, ignore_errors=True)
            refresh_index(root)
    except (OSError, ValueError):
        pass


def _is_stale(tmp: Path) -> bool:
    """Whether no live process is writing this staging folder."""
    if tmp in _HELD:
        return False
    try:
        fd = os.open(tmp / _LOCK, os.O_RDWR)
    except FileNotFoundError:
        try:
            return time.time() - tmp.stat().st_mtime > _UNLOCKED_GRACE_S
        except OSError:
            return False
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # held by a live writer
    finally:
        os.close(fd)
    return True


def recover_stale(root: str | os.PathLike, recorded: set[str]) -> dict[str, list[str]]:
    """Finish or remove the staging folders whose writer died (a killed audit).

    A staged run whose id is in ``recorded`` (completed in the catalog) was killed between
    recording and publishing: it is published, so catalog and index agree.  Any other stale
    staging folder is removed.  Returns ``{"published": [...], "removed": [...]}`` (folder paths).
    """
    root = Path(root)
    out: dict[str, list[str]] = {"published": [], "removed": []}
    if not root.is_dir():
        return out
    for bench_dir in (p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for tmp in [p for p in bench_dir.iterdir() if p.name.startswith(_TMP) and p.is_dir()]:
            if not _is_stale(tmp):
                continue
            run_id = None
            try:
                run_id = read_manifest(tmp).run_id
            except (ValueError, OSError):
                pass
            final = tmp.with_name(tmp.name[len(_TMP):])
            if run_id is not None and run_id in recorded and not final.exists():
                (tmp / _LOCK).unlink(missing_ok=True)
                os.replace(tmp, final)
                out["published"].append(str(final))
            else:
                shutil.rmtree(tmp, ignore_errors=True)
                out["removed"].append(str(tmp))
    if out["published"]:
        refresh_index(root)
    return out


def read_manifest(run_dir: Path) -> Manifest:
    return Manifest.model_validate_json((run_dir / "manifest.json").read_text(encoding="utf-8"))


def refresh_index(root: str | os.PathLike) -> Index:
    """Rebuild <root>/index.json from the completed run directories."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    target = root / "index.json"
    if target.is_dir():
        raise FileExistsError(f"{target} is a folder (left by an earlier benchcert for a benchmark named "
                              "'index.json'); move it away so the index can be written")
    with FileLock(str(root / ".index.lock"), timeout=120):
        entries = []
        for bench_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            by_bench: dict[str, list] = {}
            for run_dir in bench_dir.iterdir():
                if run_dir.name.startswith(".") or not (run_dir / "manifest.json").is_file():
                    continue
                try:
                    m = read_manifest(run_dir)
                except (ValueError, OSError):
                    continue  # not ours or unreadable: never let one bad folder hide the rest
                if (run_dir.name != safe_component(m.run_id)
                        or bench_dir.name not in folder_candidates(m.benchmark)):
                    continue  # a folder that is not where this run belongs (moved or hand-made)
                by_bench.setdefault(m.benchmark, []).append((m.finished_at, m.run_id))
            for benchmark, runs in sorted(by_bench.items()):
                runs.sort()
                entries.append(IndexEntry(benchmark=benchmark, dir=bench_dir.name, latest_run_id=runs[-1][1],
                                          latest_finished_at=runs[-1][0], runs=[r[1] for r in runs]))
        index = Index(updated_at=iso(dt.datetime.now(dt.timezone.utc)), benchmarks=entries)
        tmp = root / f".index.json.{uuid.uuid4().hex}"
        try:
            _write_json(tmp, index)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    return index


def _run_folders(root: Path) -> set[tuple[str, str]]:
    """(benchmark folder, run folder) of every published run directory (by name; nothing read)."""
    out = set()
    for bench_dir in (p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        out |= {(bench_dir.name, r.name) for r in bench_dir.iterdir()
                if not r.name.startswith(".") and (r / "manifest.json").is_file()}
    return out


def read_index(root: str | os.PathLike) -> dict:
    """index.json's content; rebuilt from the run directories when it is missing, damaged, or
    does not list exactly the run folders on disk (an audit killed between publishing its run
    and re-indexing)."""
    root = Path(root)
    try:
        index = Index.model_validate_json((root / "index.json").read_text(encoding="utf-8"))
        listed = {(e.dir, safe_component(r)) for e in index.benchmarks for r in e.runs}
        if root.is_dir() and listed != _run_folders(root):
            index = refresh_index(root)
    except (OSError, ValueError):
        index = refresh_index(root)
    return index.model_dump(mode="json")


def find_run(root: str | os.PathLike, run_id: str) -> Path | None:
    """The directory of ``run_id`` under ``root`` (any benchmark), or None."""
    root = Path(root)
    if not root.is_dir():
        return None
    name = safe_component(run_id)
    for bench_dir in root.iterdir():
        candidate = bench_dir / name
        if bench_dir.is_dir() and (candidate / "manifest.json").is_file():
            return candidate
    return None


def load_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
