"""The one escaper of everything benchcert writes as HTML or SVG.

Every string that may come from a log (model, subject, benchmark and variant names, table
cells, warnings, paths, run ids) reaches the report, an analysis' report section or the
dashboard through :func:`escape`; analyses import it from here and never call
:func:`html.escape` directly, so no page can skip the character clean-up below.

Two things happen, in this order:

* :func:`clean` replaces characters that are illegal in XML 1.0 (control characters such as
  NUL, lone surrogates, non-characters) so inline SVG stays well-formed and the document can
  always be encoded as UTF-8, and bidi embeddings, overrides and isolates, with which a name
  from a log could reorder the text around it (make ``gpt-evil`` read as another model); each
  becomes U+FFFD;
* :func:`html.escape` with ``quote=True``, so the result is safe in text and in attribute values.
"""

from __future__ import annotations

import html
import re
from typing import Any

__all__ = ["XML_ILLEGAL", "clean", "escape", "truncate"]

#: Characters replaced by U+FFFD before escaping: not allowed in XML 1.0 (control characters,
#: lone surrogates, non-characters), and the bidi embeddings, overrides and isolates.
XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff"
                         "\u202a-\u202e\u2066-\u2069]")


#: Every character :func:`escape` changes: those of :data:`XML_ILLEGAL` and the five :func:`html.escape` replaces.
_TOUCHED = re.compile(XML_ILLEGAL.pattern[:-1] + "&<>\"']")


def clean(text: str) -> str:
    """``text`` with every character of :data:`XML_ILLEGAL` replaced by U+FFFD (same length)."""
    return XML_ILLEGAL.sub("\ufffd", text)


def escape(value: Any) -> str:
    """HTML/XML-escape any value after :func:`clean` (``None`` -> empty string).

    Parameters
    ----------
    value
        Anything; it is converted with :class:`str`.

    Returns
    -------
    str
        Text safe in HTML and SVG text and in quoted attribute values.
    """
    s = "" if value is None else str(value)
    if not _TOUCHED.search(s):  # nothing to clean or escape (most names and numbers): one scan, no copies
        return s
    return html.escape(clean(s), quote=True)


def truncate(text: str, max_chars: int) -> str:
    """:func:`clean` ``text`` and cut it to at most ``max_chars`` characters, ending in an ellipsis.

    The result is not escaped (pass it to :func:`escape`); ``max_chars`` below 2 keeps the
    whole text.
    """
    s = clean(text)
    if max_chars < 2 or len(s) <= max_chars:
        return s
    return s[: max_chars - 1].rstrip() + "\u2026"
