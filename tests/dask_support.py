"""What the Dask tests share: a run's artifacts read for comparison (the fields that name the run or
its time left out), and the comparison itself."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

from conftest import tool

#: Fields that name the run or its time: the only ones allowed to differ between the paths.
RUN_FIELDS = {"run_id", "flow_run_id", "started_at", "finished_at", "created_at", "timings_s", "run_dir"}
#: ... and the artifacts root, which the test chooses apart for the two runs.
RUN_FIELDS |= {"artifacts_root"}


def _strip(obj):
    return tool("compare_runs").without_keys(obj, RUN_FIELDS)


def artifacts(run_dir: Path, run_id: str, started: str) -> dict:
    out = {}
    for p in sorted(run_dir.rglob("*")):
        if not p.is_file():
            continue
        rel = str(p.relative_to(run_dir))
        if p.suffix == ".json":
            out[rel] = _strip(json.loads(p.read_text(encoding="utf-8")))
        elif p.suffix == ".parquet":
            out[rel] = pl.read_parquet(p)
        else:
            text = p.read_text(encoding="utf-8").replace(run_id, "RUN")
            out[rel] = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?", "TIME", text)
    return out


def same_artifacts(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        if isinstance(a[k], pl.DataFrame):
            assert a[k].equals(b[k]), k
        else:
            assert a[k] == b[k], k
