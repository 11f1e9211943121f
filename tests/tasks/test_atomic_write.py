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
