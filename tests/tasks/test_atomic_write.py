"""tasks/atomic_write.py: a file is replaced whole or not at all, and no temporary file is left behind."""

from __future__ import annotations

import pytest

from benchcert.tasks.atomic_write import write_text_atomic


def test_a_write_replaces_the_file_whole(tmp_path):
    target = tmp_path / "doc.json"
    target.write_text("old", encoding="utf-8")
    assert write_text_atomic(target, '{"new": "é"}') == target
    assert target.read_text(encoding="utf-8") == '{"new": "é"}'
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary_one(tmp_path):
    target = tmp_path / "doc.json"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(target, "a lone surrogate \ud800 cannot be written as UTF-8")
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]


def test_a_private_file_is_its_owners_and_a_public_one_takes_the_umask(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        private = write_text_atomic(tmp_path / "cache.json", "x")
        public = write_text_atomic(tmp_path / "index.html", "x", private=False)  # a dashboard page a web server reads
    finally:
        os.umask(old)
    assert private.stat().st_mode & 0o777 == 0o600
    assert public.stat().st_mode & 0o777 == 0o644 and public.read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json", "index.html"]
