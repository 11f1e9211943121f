"""Are two audit runs the same result?  ``summary.json`` and every ``tables/*.parquet`` compared.

    python tools/compare_runs.py RUN_DIR_A RUN_DIR_B

A refactor that must not change behaviour (issue #23's restructure) is checked by auditing the
same bundled data before and after and comparing the two run directories: everything must be
equal apart from what names the run (run id, times, run-time measurements).  Exit 0 when equal,
1 with one line per difference otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl

#: Keys that name or time the run, not its result.
RUN_KEYS = {"run_id", "created_at", "flow_run_id", "started_at", "finished_at", "timings_s", "seconds"}
#: Table columns that hold run-time measurements (wall seconds of a step).
TIME_COLUMNS = {"seconds", "wall_s", "cpu_s"}


def without_keys(obj, keys=RUN_KEYS):
    """``obj`` (parsed JSON) with every dict entry under one of ``keys`` left out, at every depth."""
    if isinstance(obj, dict):
        return {k: without_keys(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [without_keys(v, keys) for v in obj]
    return obj


def _diff(a, b, where: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'B' if k not in a else 'A'}")
            else:
                _diff(a[k], b[k], f"{where}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{where}[{i}]", out)
    elif a != b and not (a != a and b != b):  # NaN equals NaN here
        out.append(f"{where}: {a!r} != {b!r}")


def compare_runs(a: Path, b: Path) -> list[str]:
    """Every difference between run directories ``a`` and ``b`` beyond the run's name and times."""
    out: list[str] = []
    sa = without_keys(json.loads((a / "summary.json").read_text()))
    sb = without_keys(json.loads((b / "summary.json").read_text()))
    _diff(sa, sb, "summary", out)
    ta = {p.name for p in (a / "tables").glob("*.parquet")}
    tb = {p.name for p in (b / "tables").glob("*.parquet")}
    out += [f"tables/{n}: only in {'A' if n in ta else 'B'}" for n in sorted(ta ^ tb)]
    for name in sorted(ta & tb):
        fa, fb = pl.read_parquet(a / "tables" / name), pl.read_parquet(b / "tables" / name)
        drop = [c for c in fa.columns if c in TIME_COLUMNS]
        fa, fb = fa.drop(drop), fb.drop([c for c in drop if c in fb.columns])
        if fa.schema != fb.schema:
            out.append(f"tables/{name}: schema {fa.schema} != {fb.schema}")
        elif not fa.equals(fb, null_equal=True):
            out.append(f"tables/{name}: values differ ({fa.height} vs {fb.height} rows)")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    diffs = compare_runs(Path(argv[0]), Path(argv[1]))
    for d in diffs:
        print(d)
    print("identical apart from run ids and times" if not diffs else f"{len(diffs)} difference(s)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
