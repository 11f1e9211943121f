"""The one escaper of report, dashboard and analysis sections (tasks/render/escape.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from benchcert.tasks.render.escape import clean, escape, truncate


@pytest.mark.parametrize("ch", ["\x00", "\x08", "\x0b", "\x1f", "\x7f", "\ud800", "\ufffe", "\u202a", "\u202e",
                                "\u2066", "\u2069"])
def test_illegal_and_bidi_characters_become_replacement_characters(ch):
    out = escape(f"a{ch}b")
    assert out == "a\ufffdb" and clean(f"a{ch}b") == "a\ufffdb"
    ET.fromstring(f"<t>{out}</t>")  # well-formed XML


def test_markup_and_quotes_are_escaped_and_none_is_empty():
    assert escape("<b a=\"1\" c='2'>&</b>") == "&lt;b a=&quot;1&quot; c=&#x27;2&#x27;&gt;&amp;&lt;/b&gt;"
    assert escape(None) == "" and escape(3.5) == "3.5"
    assert escape("tab\tnewline\n") == "tab\tnewline\n"  # legal whitespace is kept


def test_truncate_cleans_and_ends_with_an_ellipsis():
    assert truncate("abcdef", 4) == "abc\u2026"
    assert truncate("ab  cdef", 4) == "ab\u2026"  # no space before the ellipsis
    assert truncate("abc", 3) == "abc" and truncate("abcdef", 1) == "abcdef"
    assert truncate("\x00bcdef", 3) == "\ufffdb\u2026"
