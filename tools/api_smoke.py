"""The Python API of an installed benchcert against its own command line (make wheel-check runs it).

Run with the installed package's interpreter from a folder outside the checkout, so that nothing but
the installed wheel is imported.  A pandas and a polars DataFrame of the bundled MMLU-Pro logs (five
models) go into throw-away stores through ``benchcert.Store``; the same rows, written as CSV, go
through the installed ``benchcert`` command (ingest, audit --json, compare --json).  Every model's
scores, headline interval and rank, and the comparison rows, must be the same.  Exit 0 when they
are, 1 naming the first difference.

    python tools/api_smoke.py [--bin DIR]    # DIR: where the installed `benchcert` command is
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

FIVE = ["gemini-1.5-pro-002", "gemini-1.5-flash-002", "DeepSeek-Coder-V2", "Meta-Llama-3_1-70B-Instruct",
        "Meta-Llama-3_1-70B"]
MAPPING = {"item_id": "question_id", "subject": "src", "domain": "category", "score": "correct"}


def _cli(bin_dir: Path, *argv) -> str:
    out = subprocess.run([str(bin_dir / "benchcert"), *map(str, argv)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"api_smoke: benchcert {' '.join(map(str, argv[:2]))} exited {out.returncode}: "
                         f"{out.stderr.strip()[-500:]}")
    return out.stdout


def _model_numbers(models) -> dict:
    return {m["model"]: (m["pooled"]["estimate"], m["macro"]["estimate"], m["macro"]["headline"]["lower"],
                         m["macro"]["headline"]["upper"], m["rank"], m["rank_lower"], m["rank_upper"])
            for m in models}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", type=Path, default=Path(sys.executable).parent,
                   help="folder of the installed benchcert command (default: beside this interpreter)")
    args = p.parse_args(argv)

    import pandas as pd
    import polars as pl

    import benchcert as bc

    here = Path(bc.__file__).resolve()
    if Path.cwd() in here.parents:
        print(f"api_smoke: benchcert imported from {here}, inside the working folder: run it outside the checkout",
              file=sys.stderr)
        return 1
    logs = importlib.resources.files("benchcert.data") / "mmlu_pro" / "mmlu_pro_item_correctness_long.csv.gz"
    frame = pl.read_csv(logs.read_bytes()).filter(pl.col("model").is_in(FIVE))
    results = {}
    for kind, source in (("polars", frame), ("pandas", frame.to_pandas())):
        assert kind == "polars" or isinstance(source, pd.DataFrame)
        with bc.Store(prefect=False) as store:
            store.ingest(source, benchmark="mmlu_pro", mapping=MAPPING)
            audit = store.audit("mmlu_pro")
            gap = store.compare("gemini-1.5-flash-002", "gemini-1.5-pro-002", benchmark="mmlu_pro")
            results[kind] = (_model_numbers(audit.summary.model_dump(mode="json")["models"]),
                             gap.as_dict()["comparisons"])
            print(f"api_smoke: {kind} DataFrame: {audit.n_models} models audited; flash vs pro "
                  f"{gap.comparisons[0].verdict} ({100 * gap.comparisons[0].gap:+.2f} pp)")
    with tempfile.TemporaryDirectory() as tmp:
        csv, db = Path(tmp) / "five.csv", Path(tmp) / "cli.duckdb"
        frame.write_csv(csv)
        maps = [a for k, v in MAPPING.items() for a in ("--map", f"{k}={v}")]
        _cli(args.bin, "ingest", csv, "--db", db, "--benchmark", "mmlu_pro", "--in-process", *maps)
        cli_audit = json.loads(_cli(args.bin, "audit", "--db", db, "--benchmark", "mmlu_pro", "--artifacts",
                                    Path(tmp) / "artifacts", "--in-process", "--json"))
        cli_compare = json.loads(_cli(args.bin, "compare", "gemini-1.5-pro-002", "gemini-1.5-flash-002", "--db", db,
                                      "--benchmark", "mmlu_pro", "--json"))
    expected = (_model_numbers(cli_audit["models"]), cli_compare["comparisons"])
    for kind, got in results.items():
        if got[0] != expected[0]:
            diff = {k: (got[0].get(k), v) for k, v in expected[0].items() if got[0].get(k) != v}
            print(f"api_smoke: the {kind} DataFrame's audit differs from the command line's: {diff}", file=sys.stderr)
            return 1
        if got[1] != expected[1]:
            print(f"api_smoke: the {kind} DataFrame's comparison differs from the command line's", file=sys.stderr)
            return 1
    print(f"api_smoke: the Python API (polars and pandas) and the command line agree "
          f"({len(expected[0])} models, 1 comparison)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    sys.exit(main())
