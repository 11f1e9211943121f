"""Human labels follow the scores' conflict rule (issue #39): a contradicting human label is refused,
naming both sources, unless ``--replace-human-labels`` asks to replace it; the replaced values are kept
in the store's ``human_label_changes``, so nothing stored is lost."""

from __future__ import annotations

from pathlib import Path

from benchcert.tasks.store import responses
from benchcert.tasks.store.connection import open_store

from store_support import cli


def _write(path: Path, *rows: tuple) -> Path:
    path.write_text("model,item_id,score,human_score\n" + "".join(f"m,{i},{s},{h}\n" for i, s, h in rows))
    return path


def _human(db) -> dict:
    with open_store(db, write=False) as con:
        return dict(con.execute("SELECT item_id, human_score FROM responses ORDER BY item_id").fetchall())


def test_a_contradicting_human_label_is_refused_unless_replacing_is_asked_and_the_old_one_is_kept(capsys, tmp_path):
    db = tmp_path / "s.duckdb"
    first = _write(tmp_path / "first.csv", ("q1", 1, 1), ("q2", 0, 0), ("q3", 1, ""))
    assert cli(capsys, "ingest", first, "--db", db, "--benchmark", "b")[0] == 0
    second = _write(tmp_path / "second.csv", ("q1", 1, 0), ("q2", 0, 0), ("q3", 1, 0.5), ("q4", 0, 1))
    code, out, err = cli(capsys, "ingest", second, "--db", db, "--benchmark", "b")
    assert code == 1 and f"{second}:2" in err and f"{first}:2" in err and "--replace-human-labels" in err, (out, err)
    assert _human(db) == {"q1": 1.0, "q2": 0.0, "q3": None}
    with open_store(db, write=False) as con:
        assert responses.human_label_changes(con) == []
    code, out, err = cli(capsys, "ingest", second, "--db", db, "--benchmark", "b", "--replace-human-labels")
    assert code == 0, (out, err)
    assert "1 human label(s) replaced" in out
    assert _human(db) == {"q1": 0.0, "q2": 0.0, "q3": 0.5, "q4": 1.0}
    with open_store(db, write=False) as con:
        changes = responses.human_label_changes(con)
        sources = dict(con.execute("SELECT path, source_id FROM sources").fetchall())
    assert [c[:11] for c in changes] == [("b", "m", "q1", "", 0, 1.0, sources[str(first)], 2, 0.0,
                                          sources[str(second)], 2)]
    # A score contradiction is still refused with the flag: it replaces human labels only.
    third = _write(tmp_path / "third.csv", ("q1", 0, 0))
    code, out, err = cli(capsys, "ingest", third, "--db", db, "--benchmark", "b", "--replace-human-labels")
    assert code == 1 and "contradict stored scores" in err, (out, err)


def test_replacing_goes_the_same_way_among_several_files(capsys, tmp_path):
    """The many-files path sends a file that contradicts the store to the one-file path, which replaces."""
    db = tmp_path / "s.duckdb"
    assert cli(capsys, "ingest", _write(tmp_path / "a.csv", ("q1", 1, 1)), "--db", db, "--benchmark", "b")[0] == 0
    other = _write(tmp_path / "b.csv", ("q5", 1, 1))
    again = _write(tmp_path / "c.csv", ("q1", 1, 0))
    code, out, err = cli(capsys, "ingest", other, again, "--db", db, "--benchmark", "b", "--replace-human-labels")
    assert code == 0 and "1 human label(s) replaced" in out, (out, err)
    assert _human(db) == {"q1": 0.0, "q5": 1.0}
    with open_store(db, write=False) as con:
        assert [(c[2], c[5], c[8]) for c in responses.human_label_changes(con)] == [("q1", 1.0, 0.0)]
