#!/usr/bin/env python
"""Peak memory of ingesting JSON record files, each in a fresh process (issue #39, finding 4).

A ``.json`` file of records is read as a stream (tasks/ingest/adapters/json_records.py); its
memory should stay bounded like a JSONL file's, whatever the input.  Four inputs are generated
in a temporary folder:

* ``nul .json``: a hostile file of NUL bytes (default 2 GiB), refused at its first byte;
* ``huge string .json``: one record whose ``note`` field is one string of the same size,
  refused when the record passes the line limit (``BENCHCERT_MAX_LINE_BYTES``, 64 MiB);
* ``log records .json``: a valid list of records shaped like a harness' per-sample output
  (about 2 KB each: a question, ten options, the model's text; default 200 MB, ~100,000 rows);
* ``dense records .json``: a valid list of short records (about 200 bytes each; ~1,000,000 rows),
  where the store's transaction, not the reader, holds most of the memory (any format);
* each valid file's records as JSON lines too, the reference measured in the same run.

Each is ingested into a fresh store by ``ingest_file`` (the function behind ``benchcert
ingest``) in a child process; the parent reads the child's own peak RSS (``ru_maxrss`` from
``wait4``), its CPU seconds and the wall time, and prints the load average beside them (the
machine may be shared).

    .venv/bin/python benchmarks/json_memory.py [--hostile-mib 2048] [--valid-mb 200] [--json FILE]

The target (issue #39): peak RSS under 300 MB for the 2 GiB hostile files and the 200 MB valid one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _meters import load_line, parse_or_run_child

MiB = 1 << 20
TARGET_PEAK_BYTES = 300 * 1000 * 1000  # "under 300 MB"


_WORDS = ("the", "answer", "is", "because", "energy", "of", "a", "system", "which", "therefore", "equals", "option")


def _text(i: int, n_words: int) -> str:
    return " ".join(_WORDS[(i * 7 + k * 3) % len(_WORDS)] for k in range(n_words))


def _log_record(i: int) -> dict:
    """A record shaped like a harness' per-sample output (MMLU-Pro's model outputs): about 2 KB,
    a question, ten options, the model's text, the extracted answer (null when extraction failed)."""
    return {"model": f"model-{i % 8:02d}", "item_id": f"q{i // 8:07d}", "subject": f"subject-{(i // 8) % 57:02d}",
            "domain": f"domain-{(i // 8) % 7}", "score": (i * 7919) % 3 == 0,
            "question": _text(i, 50), "options": [_text(i + k, 6) for k in range(10)], "answer": "ABCDEFGHIJ"[i % 10],
            "pred": None if i % 11 == 0 else "ABCDEFGHIJ"[(i * 3) % 10], "model_outputs": _text(i, 220)}


def _dense_record(i: int) -> dict:
    """A short record (about 200 bytes): five times the rows of a log-like file of the same size."""
    return {"model": f"model-{i % 8:02d}", "item_id": f"q{i // 8:07d}", "subject": f"subject-{(i // 8) % 57:02d}",
            "domain": f"domain-{(i // 8) % 7}", "score": (i * 7919) % 3 == 0,
            "pred": None if i % 11 == 0 else "ABCDEFGHIJ"[i % 10], "answer": "ABCDEFGHIJ"[(i * 3) % 10],
            "note": "an explanation of the answer " * 2}


def _write_records(folder: Path, stem: str, make, valid_mb: int) -> tuple[Path, Path]:
    """The same records as a JSON list (``stem.json``) and as JSON lines (``stem.jsonl``), ``valid_mb`` MB each."""
    records, lines = folder / f"{stem}.json", folder / f"{stem}.jsonl"
    with open(records, "w", encoding="utf-8") as rj, open(lines, "w", encoding="utf-8") as rl:
        rj.write("[\n")
        i, size = 0, 0
        while size < valid_mb * 1000 * 1000:
            text = json.dumps(make(i))
            rj.write((",\n " if i else " ") + text)
            rl.write(text + "\n")
            size += len(text) + 3
            i += 1
        rj.write("\n]\n")
    return records, lines


def make_inputs(folder: Path, hostile_mib: int, valid_mb: int) -> dict[str, Path]:
    out = {}
    nul = folder / "nul.json"
    with open(nul, "wb") as fh:  # written, not a sparse file: the reader sees every byte the same
        block = b"\0" * (64 * MiB)
        for _ in range(hostile_mib // 64):
            fh.write(block)
        fh.write(b"\0" * ((hostile_mib % 64) * MiB))
    out["nul .json"] = nul
    huge = folder / "huge_string.json"
    with open(huge, "wb") as fh:
        fh.write(b'[{"model": "m", "item_id": "q1", "score": 1, "note": "')
        block = b"x" * (64 * MiB)
        for _ in range(hostile_mib // 64):
            fh.write(block)
        fh.write(b'"}]\n')
    out["huge string .json"] = huge
    out["log records .json"], out["log records .jsonl"] = _write_records(folder, "log", _log_record, valid_mb)
    out["dense records .json"], out["dense records .jsonl"] = _write_records(folder, "dense", _dense_record,
                                                                             valid_mb)
    return out


def child(path: str, db: str) -> None:
    from benchcert.tasks.ingest.mapping import parse_mapping
    from benchcert.tasks.ingest.service import ingest_file

    r = ingest_file(db, path, benchmark="b", mapping=parse_mapping())
    print(json.dumps({"status": r.status, "rows_added": r.rows_added, "message": r.message[:240]}))


def _reaped_rusage(argv: list[str]) -> tuple[str, str, object, float]:
    """Run ``argv``, wait for it with wait4 (its own rusage), return (stdout, stderr, rusage, wall)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True)
        _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0  # reaped here; keeps Popen from waiting again
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return out.read(), err.read(), usage, wall


def run_one(path: Path, db: Path) -> dict:
    load_before = os.getloadavg()
    out, err, usage, wall = _reaped_rusage([sys.executable, __file__, "--child", str(path), str(db)])
    lines = out.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"status": "crashed", "message": err.strip()[-240:]}
    result.update(file_bytes=path.stat().st_size, wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime,
                  peak_rss_bytes=usage.ru_maxrss * 1024, load_before=list(load_before),
                  load_after=list(os.getloadavg()))
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hostile-mib", type=int, default=2048, help="size of each hostile file in MiB (default 2048)")
    ap.add_argument("--valid-mb", type=int, default=200, help="size of the valid records file in MB (default 200)")
    ap.add_argument("--dir", type=Path, help="where to write the inputs (default: a temporary folder, removed)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = parse_or_run_child(ap, child)
    if args is None:
        return 0
    results = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        inputs = make_inputs(folder, args.hostile_mib, args.valid_mb)
        print(f"inputs written in {time.perf_counter() - t0:.1f} s to {folder}")
        for name, path in inputs.items():
            r = run_one(path, folder / f"{path.stem}-{path.suffix[1:]}.duckdb")
            results[name] = r
            print(f"{name:<18} {r['file_bytes'] / 1e6:9.1f} MB: {r['status']:<8} rows {r.get('rows_added') or 0:>9,}  "
                  f"peak RSS {r['peak_rss_bytes'] / 1e6:6.0f} MB  wall {r['wall_s']:6.1f} s  cpu {r['cpu_s']:6.1f} s  "
                  f"load {r['load_before'][0]:.2f} -> {r['load_after'][0]:.2f}")
            if r["status"] != "ingested":
                print(f"{'':<18} {r['message'][:200]}")
    for kind in ("log", "dense"):
        ref = results[f"{kind} records .jsonl"]["peak_rss_bytes"]
        for name in (f"{kind} records .json",) + (("nul .json", "huge string .json") if kind == "log" else ()):
            print(f"{name}: peak RSS {results[name]['peak_rss_bytes'] / ref:.2f}x that of the same records as JSONL "
                  f"({kind} records .jsonl, measured in this run)")
    load = os.getloadavg()
    print(load_line(load))
    targeted = ("nul .json", "huge string .json", "log records .json")
    ok = (all(results[n]["peak_rss_bytes"] < TARGET_PEAK_BYTES for n in targeted)
          and results["log records .json"]["status"] == "ingested"
          and results["nul .json"]["status"] != "ingested" and results["huge string .json"]["status"] != "ingested")
    print(f"target (peak under {TARGET_PEAK_BYTES / 1e6:.0f} MB for the hostile files, refused, and the log-like "
          f"records file, ingested): {'PASS' if ok else 'FAIL'}")
    dense = results["dense records .json"]
    print(f"dense records .json ({dense.get('rows_added') or 0:,} rows): peak {dense['peak_rss_bytes'] / 1e6:.0f} MB; "
          "about 120 MB of it is the code of DuckDB, Polars and Arrow paged in, the rest the interpreter, batches "
          "in flight, the file's codes, items and key hashes, what DuckDB holds until the file's one transaction "
          "commits, and what the allocators keep of freed pages (any format; benchmarks/README.md)")
    if args.json:
        args.json.write_text(json.dumps({"hostile_mib": args.hostile_mib, "valid_mb": args.valid_mb,
                                         "load_average": load, "results": results}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
