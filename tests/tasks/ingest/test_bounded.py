"""Issue #26 findings 8-9: wide files in time linear in columns x rows."""

from __future__ import annotations

from benchcert.flows.cli import main


def test_a_csv_of_10006_columns_and_20_rows_costs_no_work_per_column(capsys, tmp_path, monkeypatch):
    """The issue's file did not finish in 300 s: Polars builds a frame's schema anew on every
    access, and the ingest read it once per column. The schema builds of the whole ingest are
    counted on a file of 103 columns and on the issue's 10,006: per-column work would multiply
    them by a hundred. (The seconds of a wide ingest are benchmarks/fast_paths.py's.)"""
    import polars as pl

    builds = []
    schema = pl.DataFrame.schema
    monkeypatch.setattr(pl.DataFrame, "schema", property(lambda frame: builds.append(1) or schema.fget(frame)))
    counted = {}
    for n in (103, 10_006):
        cols = ["model", "item_id", "score"] + [f"c{i}" for i in range(n - 3)]
        f = tmp_path / f"wide{n}.csv"
        f.write_text("\n".join([",".join(cols)] + [",".join(["m", f"q{r}", "1"] + ["x"] * (n - 3))
                                                    for r in range(20)]) + "\n")
        builds.clear()
        code = main(["ingest", str(f), "--db", str(tmp_path / f"s{n}.duckdb"), "--benchmark", "b"])
        assert code == 0, capsys.readouterr().err
        counted[n] = len(builds)
    assert 0 < counted[10_006] <= counted[103] + 5, counted


def test_a_line_past_the_limit_is_refused_by_name_csv_jsonl_and_gzip(capsys, tmp_path, monkeypatch):
    """Finding 9: a file with no newline was read whole (4.3 GB for 2 GB) before pyarrow's
    "straddling object" message; now the line is refused once it passes the limit."""
    import gzip

    monkeypatch.setenv("BENCHCERT_MAX_LINE_BYTES", "100000")
    (tmp_path / "a.csv").write_text("model,item_id,score\nm,q1,1\n" + "x" * 300_000)
    (tmp_path / "b.jsonl").write_text('{"model": "m", "item_id": "q", "score": 1}\n' + "y" * 300_000)
    (tmp_path / "c.csv.gz").write_bytes(gzip.compress(b"model,item_id,score\n" + b"\0" * 500_000))
    for name, line in (("a.csv", 3), ("b.jsonl", 2), ("c.csv.gz", 2)):
        code = main(["ingest", str(tmp_path / name), "--db", str(tmp_path / "s.duckdb"), "--benchmark", "b"])
        err = capsys.readouterr().err
        assert code == 1 and f"line {line} is longer than 100,000 bytes" in err and "BENCHCERT_MAX_LINE_BYTES" in err
        assert "straddl" not in err and "unexpected" not in err



def test_a_line_limit_that_is_not_a_positive_whole_number_is_a_usage_error(capsys, tmp_path, monkeypatch):
    """BENCHCERT_MAX_LINE_BYTES=inf ended as an OverflowError reported as the file's error (exit 1)."""
    from pathlib import Path

    f = tmp_path / "a.csv"
    f.write_text("model,item_id,score\nm,q1,1\n")
    db = tmp_path / "s.duckdb"
    for raw in ("inf", "nan", "1.5", "0", "-3", "64MiB"):
        monkeypatch.setenv("BENCHCERT_MAX_LINE_BYTES", raw)
        code = main(["ingest", str(f), "--db", str(db), "--benchmark", "b"])
        err = capsys.readouterr().err
        assert code == 2, (raw, err)
        assert f"BENCHCERT_MAX_LINE_BYTES={raw!r} is not a positive whole number" in err, err
        assert "Overflow" not in err and "unexpected" not in err and str(f) not in err
        assert not Path(db).exists()
    monkeypatch.setenv("BENCHCERT_MAX_DECOMPRESSED_BYTES", "inf")  # the other whole-number limits alike
    monkeypatch.setenv("BENCHCERT_MAX_LINE_BYTES", "1e6")
    code = main(["ingest", str(f), "--db", str(db), "--benchmark", "b"])
    assert code == 2 and "BENCHCERT_MAX_DECOMPRESSED_BYTES='inf'" in capsys.readouterr().err
    monkeypatch.delenv("BENCHCERT_MAX_DECOMPRESSED_BYTES")
    code = main(["ingest", str(f), "--db", str(db), "--benchmark", "b"])  # 1e6: a whole number, taken
    assert code == 0, capsys.readouterr().err

def _peak_rss_mb(path, tmp_path) -> float:
    import os
    import subprocess
    import sys

    code = ("import resource, sys; from benchcert.flows.cli import main; "
            f"main(['ingest', {str(path)!r}, '--db', {str(tmp_path / 'm.duckdb')!r}, '--benchmark', 'b']); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    env = {**os.environ, "BENCHCERT_MAX_LINE_BYTES": str(1 << 20)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    return int(out.stdout.strip().splitlines()[-1]) / 1024


def test_memory_stays_bounded_by_the_line_limit_not_the_line(tmp_path):
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_text('{"model": "m", "item_id": "q", "score": 1}\n')
    with open(big, "w") as fh:
        fh.write('{"model": "m", "item_id": "q", "score": 1}\n')
        for _ in range(160):
            fh.write("z" * (1 << 20))  # one 160 MiB line
    grew = _peak_rss_mb(big, tmp_path) - _peak_rss_mb(small, tmp_path)
    assert grew < 60, grew  # reading the line whole would take > 320 MB (bytes and text)
