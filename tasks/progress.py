"""A hook through which long work says how far it got, for whoever shows it (the CLI's progress line).

tasks/ knows nothing of terminals: it calls :func:`note`; flows/bodies.py installs a listener for
the duration of a run (:func:`listening`).  With no listener a note costs one global lookup.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

_listener: Callable[[str], None] | None = None


def note(text: str) -> None:
    if _listener is not None:
        _listener(text)


@contextlib.contextmanager
def listening(fn: Callable[[str], None] | None) -> Iterator[None]:
    global _listener
    previous, _listener = _listener, fn
    try:
        yield
    finally:
        _listener = previous


@contextlib.contextmanager
def prefixed(prefix: str) -> Iterator[None]:
    """Notes made inside the block reach the current listener as ``prefix: text``."""
    outer = _listener
    with listening(None if outer is None else (lambda text: outer(f"{prefix}: {text}"))):
        yield
