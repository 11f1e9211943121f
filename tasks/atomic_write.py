"""A file replaced whole: a reader sees the old content or the new, never half of it.

One home for the write the artifacts' suite verdicts (tasks/artifacts/suites.py), the
perturbation calibration tables (tasks/perturbation/tables.py), the h* cache
(tasks/subsample/hstar_cache.py) and the dashboard's pages rebuilt in place
(tasks/render/dashboard.py, with ``private=False``) each need: the text goes to a hidden temporary file in the
target's own folder (so the rename stays on one file system), which is then renamed over the
target; the temporary file is removed whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from pathlib import Path

__all__ = ["write_text_atomic"]


def write_text_atomic(path: str | os.PathLike, text: str, *, private: bool = True) -> Path:
    """Replace ``path`` by a file holding ``text`` (UTF-8) in one rename; returns the path.

    The folder must exist. The temporary file is ``.tmp-*`` beside the target, which the readers of
    those folders skip (their names start with a dot); an OSError (a full disk, a read-only folder)
    reaches the caller with no temporary file left behind. ``private`` (the default) makes the file
    readable by its owner only (``tempfile.mkstemp``); ``private=False`` gives it the permissions any new
    file of the process gets (its umask), as the dashboard's pages need, which a web server may read.
    """
    path = Path(path)
    if private:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    else:
        tmp = str(path.parent / f".tmp-{uuid.uuid4().hex}{path.suffix}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return path
