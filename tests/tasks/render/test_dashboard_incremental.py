"""The dashboard's incremental rebuild (tasks/render/site_cache.py, issue #37): a rebuild of a site leaves the same
files, byte for byte, as a cold build of the same artifacts at the same clock; a changed run is rendered again and a
removed one removed; a corrupt or tampered site manifest means a full rebuild; nothing planted in the old site is
kept or followed out of it."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

from benchcert.flows.cli import main
from benchcert.tasks.artifacts.runs import refresh_index
from benchcert.tasks.render.dashboard import build_site
from benchcert.tasks.render.site_cache import SITE_MANIFEST

from test_dashboard import RUNS, Page, _pages, _write
from test_dashboard import arts  # noqa: F401  (the fixture: two benchmarks, one named like markup)

NOW = dt.datetime(2026, 11, 27, 6, 0, tzinfo=dt.timezone.utc)


def _files(site: Path) -> dict[str, bytes]:
    return {str(p.relative_to(site)): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}


def _same_as_cold(arts: Path, site: Path, tmp_path: Path) -> None:
    """``site`` holds exactly the files, byte for byte, that a full build of ``arts`` into a new folder writes."""
    cold = tmp_path / f"cold-{len(list(tmp_path.glob('cold-*')))}"
    report = build_site(arts, cold, now=NOW, full=True)
    assert report.reused == 0
    got, want = _files(site), _files(cold)
    assert sorted(got) == sorted(want)
    assert [k for k in want if got[k] != want[k]] == []


def test_a_rebuild_after_new_runs_keeps_the_old_runs_and_equals_a_cold_build(arts, tmp_path):
    site = tmp_path / "site"
    first = build_site(arts, site, now=NOW)
    assert first.reused == 0 and (site / SITE_MANIFEST).is_file()
    kept_page = next(site.glob("mmlu_pro/2026110*/index.html"))
    inode = kept_page.stat().st_ino
    _write(arts, "fresh", runs=RUNS[:2])  # a nightly: a new benchmark with two runs
    again = build_site(arts, site, now=NOW)
    assert again.runs == first.runs + 2 and again.reused == first.runs
    assert kept_page.stat().st_ino == inode  # kept, not written again
    _same_as_cold(arts, site, tmp_path)
    assert "fresh" in "".join(Page((site / "index.html").read_text()).text)
    # nothing changed: every run kept, the site unchanged
    assert build_site(arts, site, now=NOW).reused == again.runs
    _same_as_cold(arts, site, tmp_path)


def test_a_changed_run_is_rendered_again_and_a_removed_one_removed(arts, tmp_path):
    runs = sorted((arts / "mmlu_pro").iterdir())

    def edit(run: Path, **fields) -> None:
        doc = json.loads((run / "summary.json").read_text())
        (run / "summary.json").write_text(json.dumps({**doc, **fields}))

    # the second run's page links to the first run (its previous run) while the site has it
    edit(runs[1], changes={"previous_run_id": runs[0].name, "new_models": [], "removed_models": [], "moves": [],
                           "regressions": []})
    site = tmp_path / "site"
    build_site(arts, site, now=NOW)
    assert f"../{runs[0].name}/index.html" in (site / "mmlu_pro" / runs[1].name / "index.html").read_text()
    edit(runs[2], warnings=["rewritten after the build"])
    shutil.rmtree(runs[0])  # the first run removed from the artifacts
    refresh_index(arts)
    report = build_site(arts, site, now=NOW)
    # the second run rendered again (its previous run is no longer linked), the third (changed) too
    assert report.runs == 3 and report.reused == 1
    assert not (site / "mmlu_pro" / runs[0].name).exists()
    assert f"../{runs[0].name}/index.html" not in (site / "mmlu_pro" / runs[1].name / "index.html").read_text()
    assert "rewritten after the build" in (site / "mmlu_pro" / runs[2].name / "index.html").read_text()
    _same_as_cold(arts, site, tmp_path)


def test_a_corrupt_or_foreign_manifest_means_a_full_rebuild(arts, tmp_path):
    site = tmp_path / "site"
    build_site(arts, site, now=NOW)
    doc = json.loads((site / SITE_MANIFEST).read_text())
    for bad in ("{not json", json.dumps({**doc, "code": "another version"}), json.dumps({**doc, "format": 0}),
                json.dumps([doc])):
        (site / SITE_MANIFEST).write_text(bad)
        (site / "stale.html").write_text("old")
        assert build_site(arts, site, now=NOW).reused == 0
        assert not (site / "stale.html").exists()
        _same_as_cold(arts, site, tmp_path)
    # --full renders every page whatever the manifest says
    assert build_site(arts, site, now=NOW, full=True).reused == 0


def test_nothing_planted_in_the_old_site_is_kept_or_followed(arts, tmp_path):
    site = tmp_path / "site"
    build_site(arts, site, now=NOW)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    run = sorted((site / "mmlu_pro").iterdir())[0]
    (run / "summary.json").unlink()
    (run / "summary.json").symlink_to(outside / "secret.txt")  # a link where a run file was
    (run / "extra.html").write_text("planted")
    other = sorted(p for p in (site / "mmlu_pro").iterdir() if p.is_dir())[1]
    shutil.rmtree(other)
    other.symlink_to(outside, target_is_directory=True)  # a run folder replaced by a link out
    (site / "stale.html").write_text("old")
    (site / ".tmp-left-by-a-crash").mkdir()
    doc = json.loads((site / SITE_MANIFEST).read_text())
    doc["runs"]["../outside/x"] = doc["runs"][f"mmlu_pro/{run.name}"]  # an entry naming a path out
    (site / SITE_MANIFEST).write_text(json.dumps(doc))
    report = build_site(arts, site, now=NOW)
    assert report.reused == report.runs - 2  # the two tampered runs were rendered again
    assert not (run / "summary.json").is_symlink() and not other.is_symlink()
    assert (outside / "secret.txt").read_text() == "secret" and sorted(os.listdir(outside)) == ["secret.txt"]
    assert "../outside/x" not in json.loads((site / SITE_MANIFEST).read_text())["runs"]
    _same_as_cold(arts, site, tmp_path)
    for p in site.rglob("*"):  # nothing in the site is a link, so no page or file leads out of it
        assert not p.is_symlink(), p
    for rel, page in _pages(site).items():
        for _tag, attrs in page.tags:
            for key in ("href", "src"):
                if key in attrs and attrs[key] != "data:,":
                    target = ((site / rel).parent / attrs[key].split("#")[0]).resolve()
                    assert site.resolve() in target.parents and target.is_file(), (rel, attrs[key])


def test_cli_full_and_the_runs_reused(arts, tmp_path, capsys):
    site = tmp_path / "site"
    assert main(["dashboard", "build", "--artifacts", str(arts), "--out", str(site), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs_reused"] == 0
    assert main(["dashboard", "build", "--artifacts", str(arts), "--out", str(site), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs_reused"] == 4
    assert main(["dashboard", "build", "--artifacts", str(arts), "--out", str(site)]) == 0
    assert "4 run page(s) unchanged" in capsys.readouterr().out
    assert main(["dashboard", "build", "--artifacts", str(arts), "--out", str(site), "--full", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs_reused"] == 0
