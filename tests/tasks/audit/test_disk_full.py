"""Issue #39 finding 9: a disk that fills while an audit writes its artifacts names the path being
written (a failed write() carries no file name, a Parquet writer's message none either)."""

from __future__ import annotations

import errno
from pathlib import Path

import polars as pl
import pytest

from store_support import cli, store_of_correct


def _store(tmp_path: Path) -> Path:
    return store_of_correct(tmp_path, "b", {"m1": [1, 0, 1, 1, 0, 1], "m2": [0, 0, 1, 1, 1, 1]}, n_subjects=2)


@pytest.mark.parametrize("where", ["report.html", "parquet"])
def test_a_full_disk_while_writing_the_artifacts_names_the_path(capsys, tmp_path, monkeypatch, where):
    db = _store(tmp_path)
    arts = tmp_path / "artifacts"
    if where == "report.html":
        real = Path.write_text

        def write_text(self, *args, **kwargs):
            if self.name == "report.html":
                raise OSError(errno.ENOSPC, "No space left on device")  # as write() raises it: no file name
            return real(self, *args, **kwargs)

        monkeypatch.setattr(Path, "write_text", write_text)
    else:
        def write_parquet(self, *args, **kwargs):
            raise pl.exceptions.ComputeError("failed to write: No space left on device (os error 28)")

        monkeypatch.setattr(pl.DataFrame, "write_parquet", write_parquet)
    code, out, err = cli(capsys, "audit", "--db", db, "--benchmark", "b", "--artifacts", arts)
    assert code == 1, (out, err)
    assert "disk full (ENOSPC)" in err and "unexpected" not in err
    written = "report.html" if where == "report.html" else ".parquet"
    line = next(x for x in err.splitlines() if "disk full" in x)
    assert f" writing {arts}" in line and written in line, line
    assert not list(arts.glob("*/*"))  # nothing half-written is published
