"""Run artifacts on disk: safe folder names, atomic run directories, index.json.

Layout (the contract dashboards read)::

    <root>/<benchmark folder>/<run id>/{manifest.json, summary.json, tables/*.parquet, report.html}
    <root>/index.json

A run directory is assembled in a hidden sibling and renamed into place, so a reader sees
it complete or not at all.  index.json is rebuilt from the run directories on disk (under a
lock, replaced atomically), so two runs finishing at once cannot lose each other's entry.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import uuid
from pathlib import Path

import polars as pl
from filelock import FileLock

from benchcert.tasks.schemas import Index, IndexEntry, Manifest, Summary

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def safe_component(name: str) -> str:
    """A folder name for ``name`` that cannot escape its parent or collide with another name.

    Names that are already safe are kept; anything else (slashes, '..', spaces, unicode,
    overlong) becomes a slug plus a hash of the original, so 'a/b' and 'a_b' stay distinct.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string; got {name!r}")
    if _SAFE.match(name) and ".." not in name:
        return name
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:60] or "x"
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:10]
    return f"{slug}-{digest}"


def inside(root: Path, *parts: str) -> Path:
    """root/parts..., refusing any result outside root (defence in depth beside safe_component)."""
    root_r = root.resolve()
    target = root_r.joinpath(*parts).resolve()
    if target != root_r and root_r not in target.parents:
        raise ValueError(f"path {target} would escape {root_r}")
    return target


def new_run_id(now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    return now.strftime("%Y%m%dT%H%M%S") + f"{now.microsecond // 1000:03d}Z-" + uuid.uuid4().hex[:6]


def iso(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _write_json(path: Path, model) -> None:
    path.write_text(model.model_dump_json(indent=2) + "\n", encoding="utf-8")


def write_run(root: str | os.PathLike, *, summary: Summary, manifest_fields: dict,
              tables: dict[str, pl.DataFrame], report_html: str) -> Path:
    """Write one run directory atomically and refresh index.json; returns the run directory."""
    root = Path(root)
    bench_dir = inside(root, safe_component(summary.benchmark))
    bench_dir.mkdir(parents=True, exist_ok=True)
    final = inside(bench_dir, safe_component(summary.run_id))
    if final.exists():
        raise FileExistsError(f"run directory {final} already exists")
    tmp = inside(bench_dir, f".tmp-{safe_component(summary.run_id)}")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "tables").mkdir(parents=True)
    try:
        table_refs = []
        for name, frame in tables.items():
            rel = f"tables/{safe_component(name)}.parquet"
            frame.write_parquet(tmp / rel)
            table_refs.append({"name": name, "file": rel, "rows": frame.height, "columns": frame.columns})
        (tmp / "report.html").write_text(report_html, encoding="utf-8")
        _write_json(tmp / "summary.json", summary)
        files = sorted(["manifest.json", "summary.json", "report.html"] + [t["file"] for t in table_refs])
        manifest = Manifest(tables=table_refs, files=files, **manifest_fields)
        _write_json(tmp / "manifest.json", manifest)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    refresh_index(root)
    return final


def read_manifest(run_dir: Path) -> Manifest:
    return Manifest.model_validate_json((run_dir / "manifest.json").read_text(encoding="utf-8"))


def refresh_index(root: str | os.PathLike) -> Index:
    """Rebuild <root>/index.json from the completed run directories."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / ".index.lock"), timeout=120):
        entries = []
        for bench_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            runs = []
            for run_dir in bench_dir.iterdir():
                if run_dir.name.startswith(".") or not (run_dir / "manifest.json").is_file():
                    continue
                try:
                    m = read_manifest(run_dir)
                except (ValueError, OSError):
                    continue  # not ours or unreadable: never let one bad folder hide the rest
                runs.append((m.finished_at, m.run_id, m.benchmark))
            if runs:
                runs.sort()
                entries.append(IndexEntry(benchmark=runs[-1][2], dir=bench_dir.name, latest_run_id=runs[-1][1],
                                          latest_finished_at=runs[-1][0], runs=[r[1] for r in runs]))
        index = Index(updated_at=iso(dt.datetime.now(dt.timezone.utc)), benchmarks=entries)
        tmp = root / f".index.json.{uuid.uuid4().hex}"
        _write_json(tmp, index)
        os.replace(tmp, root / "index.json")
    return index


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
