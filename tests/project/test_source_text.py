"""Tracked source and documentation hold no C0 control characters (tab, newline and carriage
return aside): a docstring written as a plain string once turned ``\\alpha`` into BEL + "lpha"."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def test_no_control_characters_in_source_or_docs():
    files = subprocess.run(["git", "ls-files", "*.py", "*.md", "*.toml", "*.txt", "Makefile"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    assert files
    bad = []
    for name in files:
        for no, line in enumerate((ROOT / name).read_bytes().splitlines(), 1):
            if CONTROL.search(line):
                bad.append(f"{name}:{no}")
    assert not bad, f"control characters in: {', '.join(bad[:20])}"
