r"""Model comparisons on shared items (Hardt, "Detecting differences", ch. 3; paired power analysis).

The question eval users ask is comparative: is model B better than model A on this
benchmark, and which models on a leaderboard are really different? Scores of two
models on the *same* items are strongly correlated (easy items are easy for both), so
the right unit is the per-item difference

.. math:: D_i = x_{B,i} - x_{A,i} \in [-1, 1]

on the items both models answered. An item answered by only one of them carries no
information about the gap and is excluded - and counted (``n_only_a``, ``n_only_b``),
never dropped silently.

What is here (all pure numpy/scipy, no I/O):

* :func:`paired_comparison` - one pair (or many pairs given as columns): mean gap,
  paired CLT SE, clustered-by-subject SE, exact McNemar (sign test for non-binary
  scores), the distribution-free Hoeffding interval on D in [-1, 1], the minimum
  detectable effect at the current n, and a verdict;
* :func:`pairwise_comparisons` - the same for every pair (or every model against a
  baseline) of a score matrix, from per-subject Gram matrices (one BLAS pass);
* :func:`paired_comparison_counts` - the binary case from its sufficient statistics
  (discordant counts per subject), which is what seeded simulations draw;
* :func:`unpaired_z_test` - the two-sample z-test peers use, as the contrast;
* :func:`adjust_pvalues` - Bonferroni, Holm (FWER), Benjamini-Hochberg and
  Benjamini-Yekutieli (FDR); :func:`simultaneous_intervals` - Bonferroni intervals
  (Hardt's "log k price"); :func:`family_intervals` - those of a family of comparisons, each on
  its own test's reference (the sign-flip test inverted where it decides);
* :func:`rank_confidence` - simultaneous rank intervals and groups of statistically
  tied models (:func:`point_ranks` - the point ranks, without a K x K comparison);
* :func:`minimum_detectable_effect`, :func:`paired_sample_size` (B8 paired power
  analysis) and :func:`hellinger_min_items` (Hardt's lower bound, units made explicit).

Hardt, "Detecting differences" (ch. 3 of *The Emerging Science of Machine Learning
Benchmarks*, 2025) is the reference for the coin-tossing view: detecting a gap eps
needs on the order of 1/eps^2 items (Hoeffding, sec. 3.3, Theorem 2; Hellinger lower
bound, sec. 3.4), and k simultaneous comparisons cost only a log k factor (sec. 3.5).

Where each part lives (one module per component; the names above are importable from here):

* :mod:`.results` - result types, the verdict and question vocabulary, each method's assumptions;
* :mod:`.engine` - every test from per-subject sufficient statistics of D (one formula home);
* :mod:`.signflip` - the clustered test with fewer than 30 subjects: sign changes of the subject
  sums (exact under a symmetric null whatever the subject sizes), and its interval, the test inverted;
* :mod:`.paired` - one pair from item-level scores or from binary counts, and the unpaired contrast;
* :mod:`.pairwise` - every pair of a score matrix; :mod:`.gram` its per-subject sums;
  :mod:`.blocks` the memory-budgeted blocks of models and the Dask block runner; :mod:`.packed`
  every pair of a 0/1 matrix read a block of models at a time (its bits, not the matrix);
* :mod:`.multiplicity`, :mod:`.ranks`, :mod:`.power` - families, ranks, sample sizes.
"""

from __future__ import annotations

from .._common import cr2_mean  # re-exported: it lived here first
from .blocks import PairBlock, pair_block, pair_block_runner
from .engine import column_stats, interval_verdict
from .multiplicity import adjust_pvalues, family_intervals, simultaneous_intervals
from .paired import paired_comparison, paired_comparison_counts, unpaired_z_test
from .packed import PackedScores, pack_binary_scores, pack_block_models, pairwise_comparisons_packed
from .pairwise import BLOCK_PAIR_BYTES, DENSE_PAIR_BYTES, pairwise_comparisons
from .power import (additional_sample_size, hellinger_min_items, minimum_detectable_effect, paired_sample_size,
                    power_sample_size)
from .ranks import point_ranks, rank_confidence, shared_gap_scores
from .results import (
    MIN_SUBJECTS_CLUSTERED,
    QUESTIONS,
    VERDICTS,
    AdditionalSampleSize,
    AdjustedPValues,
    ComparisonTest,
    DetectableEffect,
    PairedComparison,
    RankConfidence,
    SampleSize,
    SimultaneousIntervals,
    default_primary,
)
from .signflip import SignFlipTest, sign_flip_cluster_test

__all__ = [
    "VERDICTS",
    "ComparisonTest",
    "PairedComparison",
    "AdditionalSampleSize",
    "AdjustedPValues",
    "SimultaneousIntervals",
    "RankConfidence",
    "DetectableEffect",
    "SampleSize",
    "interval_verdict",
    "paired_comparison",
    "paired_comparison_counts",
    "cr2_mean",
    "sign_flip_cluster_test",
    "SignFlipTest",
    "default_primary",
    "MIN_SUBJECTS_CLUSTERED",
    "QUESTIONS",
    "pairwise_comparisons",
    "unpaired_z_test",
    "adjust_pvalues",
    "simultaneous_intervals",
    "family_intervals",
    "point_ranks",
    "rank_confidence",
    "shared_gap_scores",
    "minimum_detectable_effect",
    "paired_sample_size",
    "additional_sample_size",
    "power_sample_size",
    "hellinger_min_items",
    # the blocked computation's interface (tasks/audit/distributed.py) and its budgets
    "PairBlock",
    "pair_block",
    "pair_block_runner",
    "column_stats",
    "DENSE_PAIR_BYTES",
    "BLOCK_PAIR_BYTES",
    # a 0/1 matrix read by blocks of models (an out-of-core matrix's comparisons)
    "PackedScores",
    "pack_binary_scores",
    "pack_block_models",
    "pairwise_comparisons_packed",
]
