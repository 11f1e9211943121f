"""Tests for benchcert.stats.scores (the exchangeable-bounds paper, section 7.2 and Table 1)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from benchcert.stats.degenerate import DegenerateDataWarning
from benchcert.stats.validation import check_alpha
from benchcert.stats.scores import BenchmarkScores, benchmark_scores

NAN = np.nan

# Hand fixture: 6 items, 3 subjects, 2 models, subjects 0 and 1 in domain 0, subject 2 in domain 1.
#   item subj  m0   m1
#   0    0     1    1
#   1    0     0    NaN   (model 1 skipped it)
#   2    1     1    0
#   3    1     1    0
#   4    1     0    1
#   5    2     0.5  1     (a partial-credit score)
HAND_SCORES = np.array(
    [[1, 1], [0, NAN], [1, 0], [1, 0], [0, 1], [0.5, 1]],
    dtype=float,
)
HAND_SUBJECTS = np.array([0, 0, 1, 1, 1, 2])
HAND_DOMAINS = np.array([0, 0, 1])


def test_hand_fixture(no_warnings):
    r = benchmark_scores(HAND_SCORES, HAND_SUBJECTS, subject_domains=HAND_DOMAINS)
    assert isinstance(r, BenchmarkScores)
    # model 0: n = (2, 3, 1), totals (1, 2, 0.5), subject means (1/2, 2/3, 1/2)
    # model 1: n = (1, 3, 1), totals (1, 1, 1),   subject means (1, 1/3, 1)
    np.testing.assert_array_equal(r.n, [[2, 1], [3, 3], [1, 1]])
    assert np.issubdtype(r.n.dtype, np.integer)
    np.testing.assert_allclose(r.total, [[1, 1], [2, 1], [0.5, 1]])
    np.testing.assert_allclose(r.subject_mean, [[1 / 2, 1], [2 / 3, 1 / 3], [1 / 2, 1]])
    # pooled: 3.5/6 and 3/5 (the NaN item is dropped, not scored as 0)
    np.testing.assert_allclose(r.pooled, [3.5 / 6, 3 / 5])
    # macro: (1/2 + 2/3 + 1/2)/3 = 5/9 and (1 + 1/3 + 1)/3 = 7/9
    np.testing.assert_allclose(r.macro, [5 / 9, 7 / 9])
    np.testing.assert_array_equal(r.n_items, [6, 5])
    np.testing.assert_array_equal(r.n_subjects, [3, 3])
    # SD, ddof=1: model 0 deviations (-1/18, 1/9, -1/18) -> sum sq 6/324 = 1/54, /2 -> 1/108;
    # model 1 deviations (2/9, -4/9, 2/9) -> sum sq 24/81, /2 -> 12/81.
    np.testing.assert_allclose(r.subject_sd, [np.sqrt(1 / 108), np.sqrt(12) / 9])
    np.testing.assert_allclose(r.subject_min, [1 / 2, 1 / 3])
    np.testing.assert_allclose(r.subject_max, [2 / 3, 1])
    # domain 0 = subjects 0, 1: model 0 has 5 items summing to 3 -> 3/5, macro (1/2 + 2/3)/2 = 7/12;
    # model 1 has 4 items summing to 2 -> 1/2, macro (1 + 1/3)/2 = 2/3. Domain 1 = subject 2 alone.
    np.testing.assert_array_equal(r.domain_n, [[5, 4], [1, 1]])
    np.testing.assert_allclose(r.domain_pooled, [[3 / 5, 1 / 2], [1 / 2, 1]])
    np.testing.assert_allclose(r.domain_macro, [[7 / 12, 2 / 3], [1 / 2, 1]])
    assert isinstance(r.method, str) and r.method
    assert isinstance(r.assumptions, tuple) and all(isinstance(a, str) for a in r.assumptions)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.macro = None  # type: ignore[misc]


def test_default_single_domain_equals_overall(no_warnings):
    r = benchmark_scores(HAND_SCORES, HAND_SUBJECTS)
    assert r.domain_n.shape == (1, 2)
    np.testing.assert_allclose(r.domain_pooled[0], r.pooled)
    np.testing.assert_allclose(r.domain_macro[0], r.macro)


def _naive(scores, subjects, domains, k, d):
    """Pure-Python oracle: explicit loops over items, subjects and domains."""
    n_items, n_models = scores.shape
    out = {key: [] for key in ("pooled", "macro", "sd", "min", "max", "means", "dp", "dm")}
    for m in range(n_models):
        sums = [0.0] * k
        cnt = [0] * k
        for i in range(n_items):
            x = scores[i, m]
            if x == x:  # not NaN
                sums[subjects[i]] += float(x)
                cnt[subjects[i]] += 1
        means = [sums[j] / cnt[j] if cnt[j] else float("nan") for j in range(k)]
        answered = [means[j] for j in range(k) if cnt[j]]
        macro = sum(answered) / len(answered)
        var = sum((x - macro) ** 2 for x in answered) / (len(answered) - 1)
        out["pooled"].append(sum(sums) / sum(cnt))
        out["macro"].append(macro)
        out["sd"].append(var**0.5)
        out["min"].append(min(answered))
        out["max"].append(max(answered))
        out["means"].append(means)
        dp, dm = [], []
        for dd in range(d):
            members = [j for j in range(k) if domains[j] == dd]
            dn = sum(cnt[j] for j in members)
            dp.append(sum(sums[j] for j in members) / dn)
            dmeans = [means[j] for j in members if cnt[j]]
            dm.append(sum(dmeans) / len(dmeans))
        out["dp"].append(dp)
        out["dm"].append(dm)
    return out


def test_matches_naive_loop_oracle(no_warnings):
    rng = np.random.default_rng(20240601)
    k, d, n_items, n_models = 9, 3, 700, 5
    subjects = rng.integers(0, k, n_items)
    subjects[:k] = np.arange(k)  # every subject present
    domains = np.arange(k) % d
    # mix of binary and partial-credit scores, 10% missing, uneven per model
    scores = np.where(rng.random((n_items, n_models)) < 0.5, rng.integers(0, 2, (n_items, n_models)),
                      rng.random((n_items, n_models)))
    scores[rng.random((n_items, n_models)) < 0.1] = np.nan
    scores[:k] = 0.5  # keep every subject answered by every model
    r = benchmark_scores(scores, subjects, subject_domains=domains)
    o = _naive(scores, subjects, domains, k, d)
    np.testing.assert_allclose(r.pooled, o["pooled"], rtol=1e-12)
    np.testing.assert_allclose(r.macro, o["macro"], rtol=1e-12)
    np.testing.assert_allclose(r.subject_sd, o["sd"], rtol=1e-10)
    np.testing.assert_allclose(r.subject_min, o["min"], rtol=1e-12)
    np.testing.assert_allclose(r.subject_max, o["max"], rtol=1e-12)
    np.testing.assert_allclose(r.subject_mean, np.array(o["means"]).T, rtol=1e-12)
    np.testing.assert_allclose(r.domain_pooled, np.array(o["dp"]).T, rtol=1e-12)
    np.testing.assert_allclose(r.domain_macro, np.array(o["dm"]).T, rtol=1e-12)
    # macro = mean of subject means; SD equals numpy's ddof=1 SD of the subject means
    np.testing.assert_allclose(r.macro, r.subject_mean.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(r.subject_sd, r.subject_mean.std(axis=0, ddof=1), rtol=1e-10)


def test_codes_need_not_be_sorted_or_contiguous_in_items(no_warnings):
    rng = np.random.default_rng(7)
    scores = rng.integers(0, 2, (50, 3)).astype(float)
    subjects = np.repeat(np.arange(5), 10)
    perm = rng.permutation(50)
    a = benchmark_scores(scores, subjects)
    b = benchmark_scores(scores[perm], subjects[perm])
    for field in ("n", "total", "pooled", "macro", "subject_sd", "domain_macro"):
        np.testing.assert_allclose(getattr(a, field), getattr(b, field), rtol=1e-12)


def test_subject_skipped_by_a_model_warns_and_is_excluded():
    scores = HAND_SCORES.copy()
    scores[5, 1] = np.nan  # model 1 now never answered subject 2
    with pytest.warns(DegenerateDataWarning) as record:
        r = benchmark_scores(scores, HAND_SUBJECTS, subject_domains=HAND_DOMAINS)
    messages = [str(w.message) for w in record]
    assert any("subject(s) [2]" in m and "model column(s) [1]" in m for m in messages)
    # domain 1 holds only subject 2, so its scores for model 1 are NaN - warned as well
    assert any("domain(s) [1]" in m and "model column(s) [1]" in m for m in messages)
    assert np.isnan(r.subject_mean[2, 1])
    assert r.n_subjects[1] == 2
    # model 1 macro over subjects 0 and 1 only: (1 + 1/3)/2
    np.testing.assert_allclose(r.macro[1], 2 / 3)
    np.testing.assert_allclose(r.subject_sd[1], np.std([1, 1 / 3], ddof=1))
    # model 0 is untouched
    np.testing.assert_allclose(r.macro[0], 5 / 9)
    assert np.isnan(r.domain_pooled[1, 1]) and np.isnan(r.domain_macro[1, 1])
    assert r.domain_n[1, 1] == 0


def test_empty_domain_warns():
    with pytest.warns(DegenerateDataWarning, match=r"domain\(s\) \[2\]"):
        r = benchmark_scores(HAND_SCORES, HAND_SUBJECTS, subject_domains=HAND_DOMAINS, n_domains=3)
    assert np.all(np.isnan(r.domain_pooled[2])) and np.all(r.domain_n[2] == 0)


def test_subject_without_items_warns():
    with pytest.warns(DegenerateDataWarning, match=r"subject\(s\) \[3\]"):
        r = benchmark_scores(HAND_SCORES, HAND_SUBJECTS, n_subjects=4)
    assert r.n.shape == (4, 2)
    assert np.all(np.isnan(r.subject_mean[3]))
    np.testing.assert_allclose(r.macro, [5 / 9, 7 / 9])


def test_single_subject_sd_is_nan_with_warning():
    scores = np.array([[1.0], [0.0], [1.0]])
    with pytest.warns(DegenerateDataWarning, match="fewer than 2 subjects"):
        r = benchmark_scores(scores, np.zeros(3, dtype=int))
    assert np.isnan(r.subject_sd[0])
    # everything else stays defined
    np.testing.assert_allclose([r.pooled[0], r.macro[0], r.subject_min[0]], 2 / 3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(scores=np.ones(6)), r"scores must be 2-D"),
        (dict(scores=HAND_SCORES * 2), r"scores must lie in \[0, 1\]; got 2\.0"),
        (dict(scores=np.where(np.eye(6, 2) > 0, np.inf, HAND_SCORES)), r"scores must be finite"),
        (dict(scores=np.empty((0, 2))), r"scores must contain at least one item"),
        (dict(scores=[["a", "b"]] * 6), r"scores must be a numeric array"),
        (dict(subjects=HAND_SUBJECTS[:5]), r"subjects must have one code per item \(length 6\)"),
        (dict(subjects=HAND_SUBJECTS.astype(float)), r"subjects must hold integer codes"),
        (dict(subjects=HAND_SUBJECTS - 1), r"subjects must be non-negative"),
        (dict(subject_domains=np.array([0, 1])), r"subject_domains must have one code per subject"),
        (dict(n_subjects=2), r"n_subjects must exceed every subject code \(max code 2\); got 2"),
        (dict(n_subjects=2.5), r"n_subjects must be a positive integer; got 2\.5"),
        (dict(subject_domains=HAND_DOMAINS, n_domains=1), r"n_domains must exceed"),
    ],
)
def test_validator_names_parameter_and_value(kwargs, match):
    args = dict(scores=HAND_SCORES, subjects=HAND_SUBJECTS)
    args.update(kwargs)
    scores, subjects = args.pop("scores"), args.pop("subjects")
    with pytest.raises(ValueError, match=match):
        benchmark_scores(scores, subjects, **args)


def test_model_without_observed_items_is_an_error_naming_the_column():
    scores = HAND_SCORES.copy()
    scores[:, 1] = np.nan
    with pytest.raises(ValueError, match=r"model column\(s\) \[1\]"):
        benchmark_scores(scores, HAND_SUBJECTS)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1, True, "0.05", None])
def test_check_alpha(bad):
    with pytest.raises(ValueError, match="alpha must be"):
        check_alpha(bad)
    assert check_alpha(0.05) == 0.05


