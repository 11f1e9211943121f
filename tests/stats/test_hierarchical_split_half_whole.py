"""Split-half when every (subject, model) cell is a binary, splittable one (issues #15 and #27).

Issue #15: the table's draws are the chunk's half-A counts as they come (no masked scatter).
Issue #27: each domain's draws are drawn, inverted and summed one domain (or run of subjects) at a
time, from a PCG64 generator's raw 64-bit outputs, with a guide table sized for a core's cache, and
the five terms of each draw gathered from a table over the distributions' support points
(stats/split_half.py _split_whole_by_domain, _HypergeomTable._invert_raw_points); other generators
take the uniforms and compute the terms per draw. Oracle: the former
chunk-wide computation (the whole table's inverse CDF, the (K, M, splits) half-A array and the
domain sums of its five products) with the former guide table's size (2^22 entries); the results must be equal
to the last bit."""

from __future__ import annotations

import numpy as np
import pytest

from benchcert.stats import split_half as D


#: The chunk-wide path of split_half (the tests below patch the module's name).
_CHUNK_WIDE = D._split_chunks


def _former_chunks(sums, inputs, n_splits, chunk, rng):
    """The former chunk-wide computation, which the module still takes where its domain sums go
    through ``np.add.reduceat``: the whole table's uniforms inverted at once (``_invert``, checked
    against one searchsorted per cell below), the (K, M, splits) half-A array and the domain sums
    of its five products (``_SplitSums.add``)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(D, "sums_by_reduceat", lambda *a: True)
        return _CHUNK_WIDE(sums, inputs, n_splits, chunk, rng)


def _scores(seed, n_models):
    rng = np.random.default_rng(seed)
    subj = np.sort(rng.integers(0, 30, 600))
    subj[:4] = [0, 0, 1, 1]  # every subject has >= 2 items
    p = rng.beta(2, 3, (30, n_models))
    return (rng.random((600, n_models)) < p[subj]).astype(float), subj, np.arange(30) % 4


def _rngs(seed):
    """A PCG64 generator (raw outputs) and an MT19937 one (Generator.random)."""
    return {"pcg64": lambda: np.random.default_rng(seed),
            "mt19937": lambda: np.random.Generator(np.random.MT19937(seed))}


@pytest.mark.parametrize("n_models", [1, 7, 12])
@pytest.mark.parametrize("kind", ["pcg64", "mt19937"])
@pytest.mark.parametrize("block", [None, 40])  # the default block, and runs of a few subjects
def test_by_domain_gives_the_former_split_half_bit_for_bit(n_models, kind, block, monkeypatch):
    s, subj, doms = _scores(n_models, n_models)
    out = {}
    for name in ("former", "new"):
        with monkeypatch.context() as mp:
            calls = []
            if name == "former":
                mp.setattr(D._HypergeomTable, "_GUIDE_ENTRIES", 1 << 22)  # the former size: another Q, the same draws
                mp.setattr(D, "_split_chunks", lambda *a: calls.append(1) or _former_chunks(*a))
            else:
                if block is not None:
                    mp.setattr(D, "_BLOCK_DRAWS", block)
                inner = D._split_whole_by_domain
                mp.setattr(D, "_split_whole_by_domain", lambda *a: calls.append(1) or inner(*a))
            rng = _rngs(n_models)[kind]()
            out[name] = D.split_half(s, subj, doms, n_splits=200, rng=rng)
            out[name + " next"] = rng.random(3)  # the generator is left where the former path left it
            assert calls  # the all-binary, all-splittable path was taken
    for f in ("corr", "sd", "n_valid", "n_subjects", "status", "negative"):
        np.testing.assert_array_equal(getattr(out["new"], f), getattr(out["former"], f), err_msg=f)
    np.testing.assert_array_equal(out["new next"], out["former next"])
    assert np.isfinite(out["new"].corr).all()


@pytest.mark.parametrize("block", [64, 555])  # runs of 1 and of 3 subjects (5 models x 37 splits)
def test_by_domain_with_one_domain_and_subjects_of_different_sizes(block, monkeypatch):
    """hierarchy 'subject' (one domain of every subject) and uneven subjects: still the former numbers."""
    rng = np.random.default_rng(9)
    subj = np.sort(np.r_[np.arange(40), np.arange(40), rng.integers(0, 40, 900)])
    s = (rng.random((subj.size, 5)) < rng.beta(2, 2, (40, 5))[subj]).astype(float)
    out = {}
    for name in ("former", "new"):
        with monkeypatch.context() as mp:
            if name == "former":
                mp.setattr(D, "_split_chunks", _former_chunks)
            else:
                mp.setattr(D, "_BLOCK_DRAWS", block)
            out[name] = D.split_half(s, subj, None, n_splits=37, rng=np.random.default_rng(2))
    for f in ("corr", "sd", "n_valid"):
        np.testing.assert_array_equal(getattr(out["new"], f), getattr(out["former"], f), err_msg=f)


def test_raw_bits_give_the_uniforms_inverse():
    """_invert_raw on a PCG64 generator's raw outputs = _invert on Generator.random's uniforms, for any
    run of cells; both = one searchsorted per cell (the reference sampler); _invert_raw_points gives the
    same draws as support points of the cells' distributions."""
    rng = np.random.default_rng(0)
    g, b = rng.integers(0, 70, 3000), rng.integers(0, 70, 3000)
    table = D._HypergeomTable(g, b, (g + b) // 2)
    for size in (1, 4, 11):
        u = np.random.default_rng(size).random((3000, size))
        raw = np.random.default_rng(size).bit_generator.random_raw((3000, size))
        np.testing.assert_array_equal(table._invert_raw(raw.copy()), table._invert(u.copy()))
        np.testing.assert_array_equal(table._invert_raw(raw[100:900].copy(), slice(100, 900)),
                                      table._invert(u.copy())[100:900])
        np.testing.assert_array_equal(table._invert(u.copy()), table._draw_per_cell(size, np.random.default_rng(size)))
        # as support points: the point's distribution is the cell's, its value the draw
        dist, value = table.support()
        points = table._invert_raw_points(raw[100:900].copy(), slice(100, 900))
        np.testing.assert_array_equal(dist[points], np.broadcast_to(table.dist[100:900, None], points.shape))
        np.testing.assert_array_equal(value[points], table._invert(u.copy())[100:900])


def test_counts_from_the_domain_fits_change_nothing():
    """split_half(fits=fit_domains(...)) reuses the fits' subject counts: the same result, to the bit,
    on 0/1, fractional and missing scores; fits of other scores are refused."""
    from benchcert.stats.hierarchical import fit_domains

    s, subj, doms = _scores(3, 6)
    s[::7, 2] = np.nan
    s[:, 4] = np.random.default_rng(0).random(s.shape[0])
    fits = fit_domains(s, subj, doms)
    a = D.split_half(s, subj, doms, n_splits=50, rng=np.random.default_rng(1))
    b = D.split_half(s, subj, doms, n_splits=50, rng=np.random.default_rng(1), fits=fits)
    for f in ("corr", "sd", "n_valid", "n_subjects", "status", "negative", "n"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    with pytest.raises(ValueError, match="fits must be the DomainFits"):
        D.split_half(s[:, :3], subj, doms, n_splits=5, rng=np.random.default_rng(1), fits=fits)
