"""``benchcert items --out DIR``: the analysis' tables as Parquet and the reduced set's item ids as CSV."""

from __future__ import annotations

from pathlib import Path


def write_tables(result, out: Path) -> list[Path]:
    """Write ``result``'s tables to ``out`` (created); returns the files written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in result.tables().items():
        path = out / f"{name}.parquet"
        frame.write_parquet(path)
        written.append(path)
    path = out / "reduced_items.csv"
    result.items.filter("in_reduced_set").select("item_id", "subject", "domain").write_csv(path)
    written.append(path)
    return written
