"""A file replaced whole: a reader sees the old content or the new, never half of it.

One home for the write the artifacts' suite verdicts (tasks/artifacts/suites.py), the
perturbation calibration tables (tasks/perturbation/tables.py) and the h* cache
(tasks/subsample/hstar_cache.py) each need: the text goes to a hidden temporary file in the
target's own folder (so the rename stays on one file system), which is then renamed over the
target; the temporary file is removed whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["write_text_atomic"]


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Replace ``path`` by a file holding ``text`` (UTF-8) in one rename; returns the path.

    The folder must exist. The temporary file is ``.tmp-*`` beside the target, which the readers of
    those folders skip (their names start with a dot); an OSError (a full disk, a read-only folder)
    reaches the caller with no temporary file left behind.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return path
