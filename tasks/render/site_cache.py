"""The dashboard's incremental build: which run folders of the site already built can stay as they are.

A nightly adds one run per benchmark to thousands.  Rendering every run's page again, and making and removing
a folder per run at every rebuild, was most of a rebuild (issue #37, 50 benchmarks x 200 runs: on an ext4 disk
a folder made costs about 1 ms and one removed 2.5 ms of wall time, whatever the CPU).  A built site therefore
keeps a manifest, ``<out>/.benchcert-site.json`` (a dotfile: ``dashboard serve`` never serves one), holding per
run folder the key its page was rendered from:

* the run's source files as found: ``[inode, size, mtime_ns]`` of its summary.json, manifest.json and
  report.html (None for a missing one), so a run rewritten in place or replaced is rendered again;
* what the page reads from outside the run: the benchmark's interval method (set by its latest run) and
  whether the previous run it names is in the site (a link, else plain text);
* the site format: :data:`SITE_FORMAT` and a digest of the code that renders a run page
  (:func:`code_digest`), so another benchcert version renders every page again.

A rebuild of a site whose manifest is readable updates it in place (tasks/render/dashboard.py): a run folder
whose key is unchanged and that holds exactly the files expected (as regular files) stays; a new or changed
run's folder is assembled aside and renamed into place; every cross-run page is rendered and replaces its old
file atomically; folders of runs no longer listed, and anything else the build did not write, are removed
last; the manifest is written last of all.  Without a usable manifest (the first build, a corrupt or foreign
one, another version) or with ``full=True``, the site is built whole in a new folder and swapped in.  The
pages kept keep the build time they were rendered at; apart from that an incremental build leaves the same
pages as a cold one.  The runs' records the cross-run pages are rendered from are kept beside the manifest
under the same source key (:mod:`benchcert.tasks.render.record_cache`), so that a rebuild reads only new or
changed runs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

from benchcert.tasks.atomic_write import write_text_atomic

__all__ = ["SITE_MANIFEST", "SITE_FORMAT", "RUN_FILES", "code_digest", "source_key", "SiteCache"]

#: The site's manifest (a dotfile: never served).
SITE_MANIFEST = ".benchcert-site.json"
#: Bumped when the layout of a run folder changes in a way the code digest would not show.
SITE_FORMAT = 1
#: The files a run folder of the site holds (report.html only when the run has one).
RUN_FILES = ("index.html", "summary.json", "manifest.json", "report.html")

_HERE = Path(__file__).resolve().parent


@functools.cache
def code_digest() -> str:
    """A digest of the code a run page is rendered by (every module of tasks/render, the recorded verdicts'
    interval rule, the regressions and headline-question rules the run records use, and the folder names) and
    benchcert's version: any change to them renders every page again."""
    from benchcert import __version__

    h = hashlib.blake2b(f"{SITE_FORMAT}|{__version__}".encode(), digest_size=16)
    for f in sorted(_HERE.glob("*.py")) + [_HERE.parent / "compare" / "recorded.py",
                                           _HERE.parent / "audit" / "regressions.py",
                                           _HERE.parent / "audit" / "headline.py",
                                           _HERE.parent / "artifacts" / "folders.py"]:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def source_key(run_dir: Path) -> list:
    """``[inode, size, mtime_ns]`` of each of the run's source files (followed, as the build reads them), or
    None where one is missing."""
    out = []
    for name in ("summary.json", "manifest.json", "report.html"):
        try:
            st = os.stat(run_dir / name)
        except OSError:
            out.append(None)
            continue
        out.append([st.st_ino, st.st_size, st.st_mtime_ns])
    return out


class SiteCache:
    """The site's previous manifest (read once; empty when there is none to trust) and the new one."""

    def __init__(self, site: Path | None, *, full: bool = False):
        self.digest = code_digest()
        self.old: dict[str, dict] = {} if full or site is None else self._read(site)
        self.new: dict[str, dict] = {}
        self.kept = 0

    def _read(self, site: Path) -> dict[str, dict]:
        try:
            doc = json.loads((site / SITE_MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # none, unreadable or corrupt: a full rebuild
            return {}
        if (not isinstance(doc, dict) or doc.get("format") != SITE_FORMAT or doc.get("code") != self.digest
                or not isinstance(doc.get("runs"), dict)):
            return {}
        return {k: v for k, v in doc["runs"].items() if isinstance(k, str) and isinstance(v, dict)}

    @property
    def usable(self) -> bool:
        """True when the site may be updated in place (its manifest is this version's and lists runs)."""
        return bool(self.old)

    def keep(self, rel: tuple[str, str], key: list, folder: Path) -> bool:
        """True (and ``rel`` recorded) when the site's run folder ``folder`` (at ``rel``: benchmark folder, run
        folder; a real folder, not a link) was rendered from ``key`` and holds exactly the run files, as regular
        files; False when the run must be rendered again."""
        old = self.old.get("/".join(rel))
        if not old or old.get("key") != key or not isinstance(old.get("report"), bool):
            return False
        try:
            with os.scandir(folder) as it:
                entries = [(e.name, e.is_file(follow_symlinks=False)) for e in it]
        except OSError:
            return False
        want = set(RUN_FILES) if old["report"] else set(RUN_FILES) - {"report.html"}
        if {n for n, _ in entries} != want or not all(regular for _, regular in entries):
            return False
        self.record(rel, key, old["report"])
        self.kept += 1
        return True

    def record(self, rel: tuple[str, str], key: list, has_report: bool) -> None:
        """Note that the site's folder ``rel`` was rendered from ``key`` (with or without the run's report)."""
        self.new["/".join(rel)] = {"key": key, "report": has_report}

    def write(self, site: Path) -> None:
        doc = {"format": SITE_FORMAT, "code": self.digest, "runs": self.new}
        write_text_atomic(site / SITE_MANIFEST, json.dumps(doc, separators=(",", ":")), private=False)
