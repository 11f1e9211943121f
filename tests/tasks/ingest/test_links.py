"""Issue #26 finding 7: symlink loops, self-links and dangling links in a walked folder are
per-file errors named for what they are; the other files are stored (the nightly inbox too)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchcert.tasks.ingest.sources import expand_sources
from benchcert.tasks.store.connection import open_store

from store_support import cli


def test_links_that_loop_are_per_file_errors_and_the_other_files_are_stored(capsys, tmp_path):
    root = tmp_path / "logs"
    root.mkdir()
    (root / "good.csv").write_text("model,item_id,score\nm,q1,1\nm,q2,0\n")
    os.symlink("self.csv", root / "self.csv")            # ln -s self.csv self.csv
    os.symlink("b.csv", root / "a.csv")                  # a -> b -> a
    os.symlink("a.csv", root / "b.csv")
    os.symlink("nowhere.csv", root / "dangling.csv")
    db = tmp_path / "s.duckdb"
    code, out, err = cli(capsys, "ingest", root, "--db", db, "--benchmark", "b", "--json")
    assert code == 1, err
    files = {Path(f["path"]).name: f for f in json.loads(out)["files"]}
    assert files["good.csv"]["status"] == "ingested"
    assert "to itself" in files["self.csv"]["message"]
    assert "loop" in files["a.csv"]["message"] and "loop" in files["b.csv"]["message"]
    assert "dangling" in files["dangling.csv"]["message"]
    assert "unexpected" not in err
    with open_store(db, write=False) as con:
        assert con.execute("SELECT count(*) FROM responses").fetchone()[0] == 2
    # Named directly, a self-link is called what it is, not "dangling".
    code, out, err = cli(capsys, "ingest", root / "self.csv", "--db", db, "--benchmark", "b")
    assert code == 1 and "to itself" in err and "dangling" not in err


def test_nightly_inbox_lists_the_good_files_beside_a_loop(tmp_path):
    from benchcert.flows.nightly import inbox_files

    folder = tmp_path / "inbox" / "bench"
    folder.mkdir(parents=True)
    (folder / "good.csv").write_text("model,item_id,score\nm,q1,1\n")
    os.symlink("loop.csv", folder / "loop.csv")
    files, unknown = inbox_files(folder)
    assert [Path(f).name for f in files] == ["good.csv"]
    assert [Path(u["path"]).name for u in unknown] == ["loop.csv"] and "to itself" in unknown[0]["message"]


_NAMES = st.sampled_from(["a.csv", "b.csv", "c.csv", "d/e.csv", "d/f.csv", "g"])


@settings(max_examples=int(os.environ.get("BENCHCERT_HYPOTHESIS_EXAMPLES", 60)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.tuples(_NAMES, st.one_of(st.none(), _NAMES, st.just("../outside.csv"), st.just("."))),
                     max_size=8))
def test_random_trees_with_links_and_loops_never_raise_and_every_entry_is_accounted_for(tmp_path_factory, plan):
    """Random folder trees of files and links (to files, to folders, to themselves, out of the tree,
    in loops): the walk never raises, never lists a file outside the tree, and lists or reports
    every entry."""
    base = tmp_path_factory.mktemp("tree")
    root = base / "root"
    root.mkdir()
    (base / "outside.csv").write_text("x\n")
    for name, target in plan:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists() or p.is_symlink():
            continue
        if target is None:
            p.write_text("model,item_id,score\nm,q,1\n")
        else:
            os.symlink(target, p)
    files, unknown = expand_sources([str(root)])
    real = root.resolve()
    for f in files:
        assert Path(f).resolve(strict=True).is_relative_to(real) or Path(f).resolve() == real
    seen = {Path(f) for f in files} | {Path(u["path"]) for u in unknown}
    for dirpath, dirs, names in os.walk(root):
        for n in names + [d for d in dirs if (Path(dirpath) / d).is_symlink()]:
            assert Path(dirpath) / n in seen
