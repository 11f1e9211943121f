"""What a checkpoint's logs must satisfy before anything is read: inside the inbox or an allowed folder
(the event that names them is untrusted), and holding responses of the checkpoint's model. Shared by the
single-benchmark checkpoint (flows/checkpoint.py) and the suite checkpoint (flows/checkpoint_suite.py).
"""

from __future__ import annotations

import logging
from pathlib import Path

from benchcert.tasks.errors import DataError
from benchcert.tasks.store.connection import open_store
from benchcert.tasks.store.matrices import response_count

__all__ = ["LogsPathRefused", "allowed_logs_path", "model_rows"]


def model_rows(db: str, benchmark: str, model: str, lock_timeout: float) -> int:
    """How many responses of ``model`` for ``benchmark`` the store holds (0: the logs had none)."""
    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        return response_count(con, benchmark, model)


class LogsPathRefused(DataError):
    """A checkpoint event named logs outside the inbox and the allowed folders (or reached through a
    symlink loop): the event's input cannot be used, and nothing at that path is read."""


def allowed_logs_path(logs: str, inbox: str | None, allowed: list[str] | None) -> Path:
    """The event's logs path, resolved (symlinks and '..' followed), if it lies inside the inbox or an
    allowed folder; otherwise :class:`LogsPathRefused`, raised before anything at that path is read.

    The event comes from whoever can reach the Prefect server, so its path is untrusted: without
    this check a served flow would read, and echo in its errors, any file the server can read.
    """
    roots = [Path(r).resolve() for r in ([inbox] if inbox else []) + list(allowed or ())]
    text = str(logs)
    # A NUL byte (or any path the OS cannot name) is refused like a path outside the roots.
    target = None if "\x00" in text else _resolved(Path(text))
    if target is None or not any(target == r or r in target.parents for r in roots):
        where = ", ".join(str(r) for r in roots) or "none configured"
        logging.getLogger("benchcert.checkpoint").warning(
            "checkpoint logs path refused (outside the inbox and the allowed folders): %r", str(logs)[:500])
        raise LogsPathRefused(f"checkpoint logs path {str(logs)[:500]!r} refused: it is not inside the inbox or an "
                              f"allowed folder ({where}); nothing was read. Put the logs in the inbox or start "
                              "`benchcert serve` with --allow-logs DIR")
    return target


def _resolved(path: Path) -> Path:
    """``path`` with its symlinks followed; a symlink loop on the way is :class:`LogsPathRefused`.

    ``Path.resolve`` raises RuntimeError on a loop (Python 3.11), which ended the flow with a
    traceback instead of the refusal (issue #39).
    """
    from benchcert.tasks.ingest.adapters.detect import link_target

    try:
        return path.resolve()
    except (RuntimeError, OSError):
        pass
    problem = "a symlink loop along the path"
    for part in [*reversed(path.parents), path]:  # the first link on the way that leads nowhere
        if part.is_symlink() and (found := link_target(part)[1]) is not None:
            where = "" if part == path else f" ({part} is {found.removesuffix('; not read')})"
            problem = found.removesuffix("; not read") if part == path else f"a symlink loop along the path{where}"
            break
    logging.getLogger("benchcert.checkpoint").warning("checkpoint logs path refused (%s): %r", problem,
                                                      str(path)[:500])
    raise LogsPathRefused(f"checkpoint logs path {str(path)[:500]!r} refused: it is {problem}; nothing was read. "
                          "Give the logs' real location")
