"""The one escaper of report, dashboard and analysis sections (tasks/render/escape.py)."""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(alphabet=st.sampled_from(list("ab &<>\"'\t\n\x00\x0b\x7f\ud800\ufffe\u202e\u2066\u00e9")), max_size=12))
def test_the_unchanged_text_shortcut_gives_what_clean_then_html_escape_give(text):
    # escape() returns a string none of whose characters it would touch as it is (a dashboard build's speed-up);
    # the result must be the one the full path gives for every mix of touched and untouched characters.
    assert escape(text) == html.escape(clean(text), quote=True)
