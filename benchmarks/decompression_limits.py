"""Peak memory of ingesting decompression bombs, each in a fresh process (issue 14, item 6).

The reproduction of the issue: a 522 KB zip whose one member decompresses to 512 MiB (an
MMLU-Pro ``model_outputs_*.zip`` shape), the same as an inspect_ai ``.eval`` with a padded
``header.json``, and a gzip CSV of the same ratio.  benchcert refuses each; the figures show
how much memory and time the refusal costs, beside the load average (the machine is shared).

    .venv/bin/python benchmarks/decompression_limits.py [--mib 512] [--json FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from _meters import cpu_seconds, load_line, parse_or_run_child, peak_rss_bytes

HEAD = b'[{"question_id": 1, "answer": "A", "pred": "A", "src": "s", "category": "c"}'


def make_inputs(folder: Path, mib: int) -> dict[str, Path]:
    pad = b" " * (1 << 20)
    out = {}
    z = folder / "model_outputs_x_5shots.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("model_outputs_x_5shots.json", "w", force_zip64=True) as fh:
            fh.write(HEAD)
            for _ in range(mib):
                fh.write(pad)
            fh.write(b"]")
    out["zip member"] = z
    e = folder / "padded.eval"
    with zipfile.ZipFile(e, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        with zf.open("header.json", "w", force_zip64=True) as fh:
            fh.write(b'{"eval": {"task": "t", "model": "m"}, "status": "success"')
            for _ in range(mib):
                fh.write(pad)
            fh.write(b"}")
    out[".eval header"] = e
    g = folder / "bomb.csv.gz"
    with gzip.open(g, "wb") as fh:
        fh.write(b"model,item_id,score\n")
        for _ in range(mib):
            fh.write(b"0" * (1 << 20))
    out["gzip csv"] = g
    return out


def child(path: str, db: str) -> None:
    from benchcert.tasks.ingest.service import ingest_file
    from benchcert.tasks.ingest.mapping import parse_mapping

    start, cpu0 = time.perf_counter(), cpu_seconds()
    r = ingest_file(db, path, benchmark="b", mapping=parse_mapping())
    print(json.dumps({"status": r.status, "message": r.message[:300], "wall_s": time.perf_counter() - start,
                      "cpu_s": cpu_seconds() - cpu0, "peak_rss_mib": peak_rss_bytes() / 2**20}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=512, help="decompressed size of each bomb (default 512)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = parse_or_run_child(ap, child)
    if args is None:
        return 0
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        inputs = make_inputs(Path(tmp), args.mib)
        for name, path in inputs.items():
            p = subprocess.run([sys.executable, __file__, "--child", str(path), str(Path(tmp) / f"{path.stem}.duckdb")],
                               capture_output=True, text=True, check=True)
            r = json.loads(p.stdout.strip().splitlines()[-1])
            r["compressed_bytes"] = path.stat().st_size
            results[name] = r
            print(f"{name:<14} {r['compressed_bytes']:>9,} B -> {args.mib} MiB: {r['status']:<6} "
                  f"wall {r['wall_s']:.2f} s, cpu {r['cpu_s']:.2f} s, peak RSS {r['peak_rss_mib']:.0f} MiB")
    load = os.getloadavg()
    print(load_line(load))
    if args.json:
        args.json.write_text(json.dumps({"mib": args.mib, "load_average": load, "results": results}, indent=2))
    return 0 if all(r["status"] == "error" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
