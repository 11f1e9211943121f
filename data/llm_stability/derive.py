"""Derive the bundled llm-stability files from the upstream flattening (run by hand, never by tests).

    python data/llm_stability/derive.py /path/to/llm-stability/runs_long.csv.gz

Writes, next to this script:
  grice_college_mathematics.csv.gz  newsletter_grice: gpt-4o, 10 prompt variants x repeated runs x 100 items
  stochastic_noise.csv.gz           stochastic_non_determinism: one prompt repeated; runs split round-robin
                                    into 3 pseudo-variants (a pure-noise null)
See SOURCE.txt for every decision taken here.
"""

from __future__ import annotations

import gzip
import shutil
import sys
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
KEEP = ["benchmark", "model", "item_id", "subject", "domain", "variant", "replicate", "score", "parsed",
        "run_dir", "run_idx", "gt", "answer_heuristic"]


def _replicates(df: pl.DataFrame) -> pl.DataFrame:
    # run_idx restarts in every run directory (llama3-8b/navigate has two), so the replicate index is the
    # dense rank of (run_dir, run_idx) within model x task x variant.
    key = pl.col("run_dir") + pl.lit("#") + pl.col("run_idx").cast(pl.Int64).cast(pl.String).str.zfill(6)
    return df.with_columns(key.rank("dense").over("model", "task", "variant").cast(pl.Int64).sub(1).alias("replicate"))


def main(src: str) -> None:
    raw = pl.read_csv(src, infer_schema_length=0)
    raw = raw.with_columns(
        pl.col("correct_heuristic").is_not_null().cast(pl.Int64).alias("parsed"),
        # An answer the parser could not read is scored wrong, the usual harness convention; `parsed` keeps
        # the distinction.
        pl.col("correct_heuristic").cast(pl.Int64).fill_null(0).alias("score"),
        pl.col("rubric_id").alias("item_id"), pl.col("task").alias("subject"), pl.col("experiment").alias("domain"))
    grice = _replicates(raw.filter(pl.col("experiment") == "newsletter_grice")).with_columns(
        (pl.lit("llm_stability_grice_") + pl.col("task")).alias("benchmark"))
    grice.select(KEEP).sort("model", "variant", "replicate", pl.col("item_id").cast(pl.Int64)).write_csv(
        HERE / "grice_college_mathematics.csv")
    noise = _replicates(raw.filter(pl.col("experiment") == "stochastic_non_determinism")).with_columns(
        (pl.lit("llm_stability_noise_") + pl.col("task")).alias("benchmark"),
        pl.col("replicate").alias("run_number"),
        (pl.lit("runs_mod3_") + (pl.col("replicate") % 3).cast(pl.String)).alias("variant"),
        (pl.col("replicate") // 3).alias("replicate"))
    noise.select(KEEP + ["run_number"]).sort("benchmark", "model", "variant", "replicate",
                                             pl.col("item_id").cast(pl.Int64)).write_csv(HERE / "stochastic_noise.csv")
    # mtime=0 keeps the gzip bytes (and the sha256 in SOURCE.txt) reproducible
    for name in ("grice_college_mathematics.csv", "stochastic_noise.csv"):
        with open(HERE / name, "rb") as fin, gzip.GzipFile(HERE / (name + ".gz"), "wb", mtime=0) as fout:
            shutil.copyfileobj(fin, fout)
        (HERE / name).unlink()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
