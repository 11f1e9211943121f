"""The one slug function: a name made safe for an anchor, a key or a folder name.

Its callers keep their own spelling of the result through its options, and each one's output
must not change: a run's folder is found again by its name (tasks/artifacts/runs.py), a
Prefect artifact key is looked up by its key (tasks/audit/steps.py), a report's anchors are
linked to (tasks/render/report.py).
"""

from __future__ import annotations

import re

__all__ = ["slug"]


def slug(text: str, *, keep: str = "", sep: str = "-", lower: bool = True, max_len: int | None = None,
         empty: str = "") -> str:
    """``text`` with every run of characters other than ASCII letters, digits and ``keep`` (and
    every run of two or more dots) replaced by ``sep``.

    Parameters
    ----------
    text : str
        The name to turn into a slug.
    keep : str, default ""
        Characters kept besides ASCII letters and digits (``"._-"`` for a folder name).
    sep : str, default "-"
        What replaces each run of other characters.
    lower : bool, default True
        Lower-case ``text`` first (``str.lower``), so the slug has no capital letters.
    max_len : int or None, default None
        Cut the slug to this many characters, after the ends are stripped.
    empty : str, default ""
        The slug of a name with nothing left (``"x"``, ``"benchmark"``).

    Returns
    -------
    str
        The slug, with ``sep`` and ``keep`` characters stripped from both ends before it is cut.

    Examples
    --------
    >>> slug("Scores by Subject (95%)")
    'scores-by-subject-95'
    >>> slug("a/../b c", keep="._-", sep="_", lower=False)
    'a___b_c'
    >>> slug("???", max_len=40, empty="benchmark")
    'benchmark'
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string; got {text!r}")
    text = text.lower() if lower else text
    # Runs of dots are replaced too, so that a kept "." never makes a "..".
    out = re.sub(rf"[^A-Za-z0-9{re.escape(keep)}]+|\.{{2,}}", sep, text).strip(sep + keep)
    return out[:max_len] or empty
