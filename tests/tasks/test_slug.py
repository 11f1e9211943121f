"""tasks/slug.py, the one slug function, gives each of its three callers exactly what its own slug
function gave (issue #34, point 7): a run's folder and a Prefect artifact key are found again by
name, so not one character may change."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchcert.tasks.slug import slug


# The three functions as they were written before tasks/slug.py (f0109b3), kept here as the oracle.
def _report_anchor_before(text: str) -> str:  # tasks/render/report.py _slug
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower())
    return re.sub(r"-{2,}", "-", s).strip("-")


def _artifact_key_slug_before(benchmark: str) -> str:  # tasks/audit/steps.py artifact_key
    return re.sub(r"[^a-z0-9]+", "-", benchmark.lower()).strip("-")[:40] or "benchmark"


def _hashed_folder_slug_before(name: str) -> str:  # tasks/artifacts/runs.py hashed_folder
    return re.sub(r"[^A-Za-z0-9._-]+|\.{2,}", "_", name).strip("._-")[:60] or "x"


def _anchor(text):
    return slug(text)


def _key(text):
    return slug(text, max_len=40, empty="benchmark")


def _folder(text):
    return slug(text, keep="._-", sep="_", lower=False, max_len=60, empty="x")


CASES = ["", "a", "Scores by Subject (95%)", "--a--b--", "a-#-b", "a..b", "...", "._-x-_.", "a/../b c",
         "MMLU-Pro", "mmlu_pro.v2", "İstanbul", "ǅ", "K", "ß", "naïve café", "\udcff bad surrogate",
         "x" * 100, "a" + "-" * 50 + "b" * 50, "index.json", "a_b-c14cddc033", "日本語", "  ", "1.2.3"]

# Names drawn from every part of Unicode, weighted to the characters the patterns treat apart.
NAMES = st.text(alphabet=st.one_of(st.sampled_from("aZ09._- /\\..İıKßǅ"), st.characters()), max_size=120)


@pytest.mark.parametrize("text", CASES)
def test_each_caller_gets_what_its_own_function_gave(text):
    assert _anchor(text) == _report_anchor_before(text)
    assert _key(text) == _artifact_key_slug_before(text)
    assert _folder(text) == _hashed_folder_slug_before(text)


@settings(max_examples=400, deadline=None)
@given(NAMES)
def test_each_caller_gets_what_its_own_function_gave_on_any_name(text):
    assert _anchor(text) == _report_anchor_before(text)
    assert _key(text) == _artifact_key_slug_before(text)
    assert _folder(text) == _hashed_folder_slug_before(text)


def test_the_callers_use_it():
    from benchcert.tasks.render import report

    assert report.slug is slug
    # hashed_folder's folder names are pinned by the artifacts' own tests; one more here.
    from benchcert.tasks.artifacts import folders

    name = "a/../b c"
    digest = hashlib.sha256(name.encode("utf-8", errors="surrogatepass")).hexdigest()[:10]
    assert folders.hashed_folder(name) == f"a___b_c-{digest}"


def test_a_name_that_is_not_text_is_refused():
    with pytest.raises(ValueError, match="text must be a string; got 3"):
        slug(3)
