#!/usr/bin/env python
"""Cost of the few-subject-safe hierarchical interval on MMLU-Pro (issue 18).

Per model, the macro and pooled half-widths (alpha = 0.05) of Corollary 6.1 with the paper's
plug-in subject proxy (section 7.4) and with the default upper confidence bound on the proxy
(stats/hierarchical/bound.py, hierarchical_interval's Notes), on the bundled MMLU-Pro data (29 models,
14 domains of 3-11 subjects). Prints a Markdown table and the ratio's range.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hierarchical import load_matrices  # noqa: E402


def main(alpha: float = 0.05) -> None:
    from benchcert.stats.hierarchical import PROXY_SHARE, fit_domains, hierarchical_bound

    m = load_matrices()
    doms = np.asarray(m.subject_domain, dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = fit_domains(m.scores, m.item_subject, doms, proxy_alpha=PROXY_SHARE * alpha)
        means = np.nan_to_num(fits.subject_means, nan=0.0)
        hw = {}
        for w in ("macro", "pooled"):
            hw[w, "plugin"] = hierarchical_bound(means, fits.n, doms, fits.s2, weights=w, alpha=alpha).half_width
            hw[w, "upper"] = hierarchical_bound(means, fits.n, doms, fits.s2_upper, weights=w, alpha=alpha,
                                                proxy_alpha=PROXY_SHARE * alpha, profile=fits.profile).half_width
    print("| model | macro before | macro after | pooled before | pooled after |")
    print("|---|---|---|---|---|")
    for j, name in enumerate(m.models):
        print(f"| {name} | {100 * hw['macro', 'plugin'][j]:.2f} | {100 * hw['macro', 'upper'][j]:.2f} | "
              f"{100 * hw['pooled', 'plugin'][j]:.2f} | {100 * hw['pooled', 'upper'][j]:.2f} |")
    for w in ("macro", "pooled"):
        r = hw[w, "upper"] / hw[w, "plugin"]
        b, a = 100 * hw[w, "plugin"], 100 * hw[w, "upper"]
        print(f"{w}: before {b.min():.2f}-{b.max():.2f} pp (median {np.median(b):.2f}), after {a.min():.2f}-"
              f"{a.max():.2f} pp (median {np.median(a):.2f}); ratio {r.min():.2f}-{r.max():.2f} "
              f"(median {np.median(r):.2f})")


if __name__ == "__main__":
    main()
