"""Property tests (hypothesis) for issue 14: whatever bytes or names arrive, ingest never raises,
a refused file leaves the store exactly as it was, and stored rows read back exactly as written.

Sized to run in seconds in the default suite (few examples, no deadline); raise
``BENCHCERT_HYPOTHESIS_EXAMPLES`` for a longer search.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchcert.tasks.artifacts.folders import RESERVED, inside, safe_component
from benchcert.tasks.ingest.service import OK_STATUSES, ingest_file
from benchcert.tasks.ingest.mapping import parse_mapping

from store_support import assert_unchanged, snapshot

CANON = parse_mapping()
N = int(os.environ.get("BENCHCERT_HYPOTHESIS_EXAMPLES", "15"))
FAST = settings(max_examples=N, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

SEED_ROWS = [{"model": "seed", "item_id": f"q{i}", "score": i % 2, "replicate": 0} for i in range(4)]


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    """A store holding a few rows; every example works on a fresh copy of it."""
    d = tmp_path_factory.mktemp("seed")
    src = d / "seed.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in SEED_ROWS))
    db = d / "store.duckdb"
    assert ingest_file(db, src, benchmark="b", mapping=CANON).status == "ingested"
    return db


#: Exceptions the ingest's last-resort handler may translate for bad data (damaged compressed
#: streams); any other type reaching it is a defect the handler would otherwise hide.
EXPECTED_LAST_RESORT = ("EOFError", "error", "BadGzipFile", "DecompressionLimitError", "UnicodeDecodeError")


@pytest.fixture(autouse=True)
def no_unexpected_exception(monkeypatch):
    import benchcert.tasks.ingest.errors as ingest_module

    real = ingest_module.describe_failure
    seen: list[BaseException] = []

    def spy(path, exc):
        seen.append(exc)
        return real(path, exc)

    monkeypatch.setattr(ingest_module, "describe_failure", spy)
    yield
    unexpected = [e for e in seen if type(e).__name__ not in EXPECTED_LAST_RESORT]
    assert not unexpected, [f"{type(e).__module__}.{type(e).__name__}: {e}" for e in unexpected[:5]]


class _Work:
    """A temporary folder with a copy of the seeded store (hypothesis reruns a test body many times)."""

    def __init__(self, seeded: Path):
        self.dir = Path(tempfile.mkdtemp(prefix="bc-prop-"))
        self.db = self.dir / "store.duckdb"
        shutil.copy(seeded, self.db)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)


def _valid_bytes(fmt: str, rows: list[dict]) -> bytes:
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["model", "item_id", "score", "replicate"])
        for r in rows:
            w.writerow([r["model"], r["item_id"], repr(float(r["score"])), r["replicate"]])
        return buf.getvalue().encode("utf-8")
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    buf = io.BytesIO()
    pl.DataFrame(rows, schema={"model": pl.String, "item_id": pl.String, "score": pl.Float64,
                               "replicate": pl.Int64}).write_parquet(buf)
    return buf.getvalue()


ROWS = st.lists(st.fixed_dictionaries({"model": st.sampled_from(["m1", "m2"]),
                                       "item_id": st.sampled_from([f"q{i}" for i in range(6)]),
                                       "score": st.sampled_from([0.0, 0.5, 1.0]),
                                       "replicate": st.integers(0, 2)}), min_size=1, max_size=12)


@st.composite
def mutated(draw):
    """A valid file, then damaged: truncated, bytes overwritten or inserted, maybe gzipped first."""
    fmt = draw(st.sampled_from(["csv", "jsonl", "parquet"]))
    data = _valid_bytes(fmt, draw(ROWS))
    gz = draw(st.booleans())
    if gz:
        data = gzip.compress(data)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "overwrite", "insert"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "truncate":
            data = data[:pos]
        elif kind == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=8))
            data = data[:pos] + chunk + data[pos + len(chunk):]
        else:
            data = data[:pos] + draw(st.binary(min_size=1, max_size=8)) + data[pos:]
    name = f"f.{fmt}" + (".gz" if gz else "")
    return name, data


def _check_ingest(work: _Work, name: str, data: bytes, **kw) -> str:
    p = work.dir / name
    p.write_bytes(data)
    before = snapshot(work.db)
    r = ingest_file(work.db, p, benchmark="b", mapping=CANON, **kw)  # must not raise
    assert r.status in ("ingested", "unchanged", "rejected", "conflict", "error"), r
    assert r.message, r
    if r.status not in OK_STATUSES:
        assert_unchanged(before, work.db)
    return r.status


@FAST
@given(case=mutated())
def test_damaged_tables_never_raise_and_refusals_leave_the_store_unchanged(seeded, case):
    with _Work(seeded) as work:
        _check_ingest(work, *case)


@FAST
@given(data=st.binary(max_size=300), name=st.sampled_from(["x.csv", "x.jsonl", "x.parquet", "x.csv.gz", "x.zip",
                                                          "x.eval", "x.json"]),
       prefix=st.sampled_from([b"", b"\x1f\x8b", b"PK\x03\x04", b"PAR1", b"{", b"[", b"\xef\xbb\xbf"]))
def test_arbitrary_bytes_never_raise(seeded, data, name, prefix):
    with _Work(seeded) as work:
        _check_ingest(work, name, prefix + data)


@st.composite
def archives(draw):
    """Zip archives shaped like MMLU-Pro outputs or inspect_ai .eval logs, with damaged JSON inside."""
    buf = io.BytesIO()
    kind = draw(st.sampled_from(["mmlu", "eval"]))
    payload = draw(st.one_of(
        st.binary(max_size=200),
        st.builds(lambda v: json.dumps(v).encode(), st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3), max_leaves=10))))
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        if kind == "mmlu":
            z.writestr("model_outputs_m_5shots.json", payload)
        else:
            z.writestr("header.json", payload)
            z.writestr("samples/1_epoch_1.json", draw(st.binary(max_size=50)))
    data = buf.getvalue()
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    return ("model_outputs_m_5shots.zip" if kind == "mmlu" else "x.eval"), data


@FAST
@given(case=archives())
def test_damaged_archives_never_raise(seeded, case):
    with _Work(seeded) as work:
        _check_ingest(work, *case)



# --- random duplicate members in .eval archives (issue #26) ----------------------------------------

EVALS = [Path(__file__).parents[2] / "data" / "native" / "inspect_ai" / name
         for name in ("2025-02-11T15-18-04-05-00_popularity_mj7khqpMM4GBCfVQozKgzB.eval", "log_streaming.eval")]


def _members(path: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(path) as z:
        return [(n, z.read(n)) for n in z.namelist()]


def _copy(data: bytes, how: str) -> bytes:
    """A repeat of a sample member: the same bytes, the same JSON written otherwise, its score
    flipped, or another field changed."""
    if how == "same":
        return data
    sample = json.loads(data)
    if how == "score":
        for score in sample["scores"].values():
            score["value"] = "I" if score["value"] == "C" else "C"
    elif how == "other":
        sample["metadata"] = {**(sample.get("metadata") or {}), "copy": 2}
    return json.dumps(sample, sort_keys=True, indent=1).encode()


@st.composite
def repeated_members(draw):
    """An inspect_ai .eval archive (10 samples of one epoch, or 2 samples x 2 epochs) keeping a
    random subset of its samples, with 1-3 of them written again anywhere in the archive."""
    members = _members(draw(st.sampled_from(EVALS)))
    samples = [n for n, _ in members if n.startswith("samples/")]
    keep = set(draw(st.lists(st.sampled_from(samples), min_size=1, max_size=len(samples), unique=True)))
    entries = [(n, d) for n, d in members if not n.startswith("samples/") or n in keep]
    original = dict(entries)
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(sorted(keep)))
        how = draw(st.sampled_from(["same", "reformatted", "score", "other"]))
        entries.insert(draw(st.integers(0, len(entries))), (name, _copy(original[name], how)))
    return entries, len(keep), draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))


def _first_disagreement(entries: list[tuple[str, bytes]]) -> tuple[str, int, int] | None:
    """The first member (in archive order) whose copies differ as JSON: its name, the entry of
    its first copy and of the first copy that differs from it (1-based), else None."""
    first: dict[str, tuple[int, object]] = {}
    for at, (name, data) in enumerate(entries, start=1):
        if name.startswith("samples/"):
            first.setdefault(name, (at, json.loads(data)))
    for name, (at, value) in first.items():
        for later, (other, data) in enumerate(entries, start=1):
            if other == name and later > at and json.loads(data) != value:
                return name, at, later
    return None


@FAST
@given(case=repeated_members())
def test_repeated_eval_members_are_read_once_or_refused_naming_both_entries(seeded, case):
    """A sample member written twice: copies that agree (as JSON) are read once, so the rows are
    the distinct samples; copies that differ refuse the log naming the member and both entries,
    and nothing of it is stored. Never an unexpected exception (the autouse spy)."""
    import warnings

    entries, n_samples, compression = case
    with _Work(seeded) as work:
        log = work.dir / "repeated.eval"
        with zipfile.ZipFile(log, "w", compression=compression) as z, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Duplicate name": the point of the test
            for name, data in entries:
                z.writestr(name, data)
        before = snapshot(work.db)
        r = ingest_file(work.db, log, benchmark=None, mapping=CANON)
        clash = _first_disagreement(entries)
        if clash is None:
            assert r.status == "ingested", r.message
            assert r.rows_added == n_samples
        else:
            name, first, second = clash
            assert r.status == "error", r.message
            assert f"member {name} appears twice" in r.message, r.message
            assert f"(entries {first} and {second})" in r.message and "different contents" in r.message
            assert_unchanged(before, work.db)

# --- stored rows round-trip exactly ----------------------------------------------------------------

NAME = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r"), min_size=1, max_size=12).filter(
    lambda s: s == s.strip() and s.strip())
#: Model names hold no control character (issue #26: refused at ingest; items may hold them).
MODEL_NAME = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=12).filter(
    lambda s: s == s.strip() and s.strip())


@st.composite
def distinct_rows(draw):
    keys = draw(st.lists(st.tuples(MODEL_NAME, NAME, st.integers(0, 2**53)), min_size=1, max_size=10,
                         unique_by=lambda k: k))
    items = {}
    rows = []
    for model, item, rep in keys:
        score = draw(st.floats(0, 1, allow_nan=False))
        rows.append({"model": model, "item_id": item, "score": score, "replicate": rep})
        items.setdefault(item, None)
    return rows


@FAST
@given(rows=distinct_rows(), fmt=st.sampled_from(["csv", "jsonl", "parquet"]), gz=st.booleans())
def test_stored_rows_round_trip_exactly(seeded, rows, fmt, gz):
    with _Work(seeded) as work:
        data = _valid_bytes(fmt, rows)
        name = f"r.{fmt}" + (".gz" if gz else "")
        p = work.dir / name
        p.write_bytes(gzip.compress(data) if gz else data)
        r = ingest_file(work.db, p, benchmark="fresh", mapping=CANON)
        assert r.status == "ingested" and r.rows_added == len(rows), (r.status, r.message, r.rejects[:3])
        from benchcert.tasks.store.connection import open_store, query_pl

        with open_store(work.db, write=False) as con:
            got = query_pl(con, "SELECT model, item_id, score, replicate FROM responses WHERE benchmark = 'fresh'")
        want = pl.DataFrame(rows, schema=got.schema)
        assert sorted(got.iter_rows()) == sorted(want.iter_rows())


# --- hostile names -----------------------------------------------------------------------------------

#: What the ingest strips around text: Unicode White_Space (Polars' strip_chars), which unlike
#: Python's str.strip() keeps the separators U+001C..U+001F.
WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"

HOSTILE = st.one_of(
    st.text(min_size=1, max_size=40),
    st.sampled_from(["index.json", "INDEX.JSON", "..", ".", "../x", "/etc", ".hidden", "a/b", "a_b-c14cddc033",
                     "tables", "con", "x" * 300, "\u202egnp.exe", "a\x00b"]),
    st.builds(lambda a, b: f"{a}-{b}", st.text("ab_", min_size=1, max_size=3),
              st.text("0123456789abcdef", min_size=10, max_size=10)),
)


@settings(max_examples=8 * N, deadline=None, derandomize=True, database=None)
@given(names=st.lists(HOSTILE, min_size=1, max_size=8, unique=True))
def test_folder_names_are_contained_unreserved_and_injective(tmp_path_factory, names):
    root = Path("/nonexistent-root")
    folders = [safe_component(n) for n in names]
    assert len(set(folders)) == len(folders), dict(zip(names, folders))
    for f in folders:
        assert not f.startswith(".") and f.lower() not in RESERVED and "/" not in f and "\\" not in f
        assert 0 < len(f) <= 100 and ".." not in f
        assert inside(root, f).parent == root.resolve()


@FAST
@given(model=st.text(min_size=1, max_size=20), item=st.text(min_size=1, max_size=20))
def test_hostile_names_in_a_log_are_stored_exactly_or_refused(seeded, model, item):
    with _Work(seeded) as work:
        p = work.dir / "h.jsonl"
        p.write_text(json.dumps({"model": model, "item_id": item, "score": 1}) + "\n", encoding="utf-8",
                     errors="surrogatepass")
        before = snapshot(work.db)
        r = ingest_file(work.db, p, benchmark="h", mapping=CANON)
        if r.status != "ingested":
            assert_unchanged(before, work.db)
            return
        from benchcert.tasks.store.connection import open_store

        with open_store(work.db, write=False) as con:
            got = con.execute("SELECT model, item_id FROM responses WHERE benchmark = 'h'").fetchall()
        assert got == [(model.strip(WHITE_SPACE), item.strip(WHITE_SPACE))]
