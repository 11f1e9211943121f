"""Known-truth and real-data study of the goodness-of-fit test (benchcert.stats.gof).

Three parts, each printed as a Markdown table (docs/analyses.md quotes them) and saved as JSON:

* ``level``: the logistic setting of the black-box classifier GoF paper, section 4.1
  (theta* ~ N(0, 0.25^2 I_200) drawn once, X ~ N(0, I_200), Y ~ Bern(sigmoid(x'theta*)),
  predictions sigmoid(x'theta*) - the exact null), n = 1,000 / 2,000 / 3,000, 5 folds,
  alpha = 0.05: the rejection rate of both versions over ``--reps`` replications (paper:
  500; its Table 1) with a 95% Clopper-Pearson interval, cross-fitting judged with the
  default variance 2 x (14) and with the paper's (14);
* ``power``: the alternative theta = -theta* (paper Figure 1, left): the share of
  ``--power-reps`` replications (paper: 50) rejecting H0: rho <= delta for tolerance
  ratios delta / delta* from 0 to 1, where delta* = AUC(likelihood ratio) - 1/2 is computed
  by Monte Carlo on 400,000 draws;
* ``digits``: scikit-learn's bundled digits set (1,797 8x8 images, 10 classes): logistic
  regression, random forest and gradient boosting trained on 600 images and evaluated on
  the other 1,197 - accuracy beside the GoF lower bound delta_min (paper Table 2 spirit,
  which used MNIST / Fashion-MNIST and an XGBoost distinguisher).

    python benchmarks/gof_study.py [level|power|digits|all] [--reps 500] [--power-reps 50] [--out DIR (default bench-output/gof)]

Prints load average and CPU seconds beside wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

from benchcert.stats.gof import gof_test

D = 200
NS = (1000, 2000, 3000)
RATIOS = (0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0)


def theta_star(d=D, seed=2024):
    return np.random.default_rng(seed).normal(0.0, 0.25, d)


def draw(n, theta, *, alternative, rng):
    x = rng.normal(size=(n, len(theta)))
    eta = 1.0 / (1.0 + np.exp(-x @ theta))
    y = (rng.random(n) < eta).astype(np.int64)
    eta_hat = 1.0 / (1.0 + np.exp(-x @ (-theta if alternative else theta)))
    return x, y, np.c_[1.0 - eta_hat, eta_hat]


def separation(theta, n=400_000, seed=7):
    """delta* = AUC(L) - 1/2 for L = likelihood ratio of P1 (model) to P0 (truth), by Monte Carlo."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)

    def log_lr(x, y):
        s = x @ theta
        # log eta_hat(y|x) - log eta(y|x) with eta_hat = sigmoid(-s), eta = sigmoid(s)
        return np.where(y == 1, -s, s) - np.where(y == 1, s, -s)

    x0, y0, _ = draw(n, theta, alternative=False, rng=rng)          # Z ~ P0
    x1, _, p1 = draw(n, theta, alternative=True, rng=rng)           # Z' ~ P1: label from the model
    y1 = (rng.random(n) < p1[:, 1]).astype(np.int64)
    scores = np.r_[log_lr(x0, y0), log_lr(x1, y1)]
    return float(roc_auc_score(np.r_[np.zeros(n), np.ones(n)], scores) - 0.5)


def cp(k, n, level=0.95):
    ci = stats.binomtest(int(k), int(n)).proportion_ci(confidence_level=level, method="exact")
    return ci.low, ci.high


Z95 = 1.6448536269514722


def level(reps):
    """Rejection rates at the exact null; cross-fit judged with the paper's (14) and the default 2 x (14)
    from the same replications (the variance does not change the statistic or the random draws)."""
    theta = theta_star()
    rows = []
    for n in NS:
        for method in ("split", "crossfit"):
            rng = np.random.default_rng(1000 + n + (0 if method == "split" else 1))
            z = []
            for _ in range(reps):
                r = gof_test(*draw(n, theta, alternative=False, rng=rng), method=method, rng=rng,
                             crossfit_variance="paper")
                z.append(np.sqrt(r.n_eval) * (r.statistic - 0.5) / r.sigma)
            z = np.array(z)
            variants = {"split": z} if method == "split" else {"crossfit-paper": z, "crossfit": z / np.sqrt(2.0)}
            for name, zz in variants.items():
                hits = int(np.sum(zz > Z95))
                lo, hi = cp(hits, reps)
                rows.append({"n": n, "method": name, "reps": reps, "rejections": hits, "rate": hits / reps,
                             "ci95": [lo, hi]})
                print(f"  level n={n} {name}: {hits}/{reps}", file=sys.stderr, flush=True)
    return rows


def power(reps):
    theta = theta_star()
    dstar = separation(theta)
    rows = []
    for n in NS:
        for method in ("split", "crossfit"):
            rng = np.random.default_rng(2000 + n + (0 if method == "split" else 1))
            res = [gof_test(*draw(n, theta, alternative=True, rng=rng), method=method, rng=rng,
                            crossfit_variance="paper") for _ in range(reps)]
            scale = {"split": 1.0} if method == "split" else {"crossfit": np.sqrt(2.0), "crossfit-paper": 1.0}
            for name, c in scale.items():
                dmin = np.array([r.statistic - 0.5 - c * r.sigma * Z95 / np.sqrt(r.n_eval) for r in res])
                rows.append({"n": n, "method": name, "reps": reps, "delta_star": dstar,
                             "mean_delta_min": float(dmin.mean()),
                             "power": {f"{r:g}": float(np.mean(dmin > r * dstar)) for r in RATIOS}})
                print(f"  power n={n} {name}: mean delta_min {dmin.mean():.3f}", file=sys.stderr, flush=True)
    return rows


def digits():
    from sklearn.datasets import load_digits
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = load_digits(return_X_y=True)
    perm = np.random.default_rng(0).permutation(len(y))
    train, test = perm[:600], perm[600:]
    models = {
        "logistic regression": make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)),
        "random forest": RandomForestClassifier(n_estimators=300, random_state=0, n_jobs=1),
        "gradient boosting": HistGradientBoostingClassifier(random_state=0),
    }
    rows = []
    for name, model in models.items():
        model.fit(x[train], y[train])
        p = model.predict_proba(x[test])
        acc = float(np.mean(p.argmax(1) == y[test]))
        row = {"classifier": name, "n_test": int(len(test)), "accuracy": acc}
        for method in ("split", "crossfit"):
            for dist in ("logistic", "gbm"):
                r = gof_test(x[test], y[test], p, method=method, distinguisher=dist, rng=1)
                row[f"{method}/{dist}"] = {"delta_min": r.delta_min, "statistic": r.statistic, "sigma": r.sigma}
        rows.append(row)
        print(f"  digits {name}: acc {acc:.3f}", file=sys.stderr, flush=True)
    return rows


def markdown(part, rows):
    out = []
    if part == "level":
        out.append("| n | sample split | cross-fit, 2 x (14) (default) | cross-fit, paper's (14) |")
        out.append("|---|---|---|---|")
        for n in NS:
            cells = []
            for m in ("split", "crossfit", "crossfit-paper"):
                r = next(r for r in rows if r["n"] == n and r["method"] == m)
                cells.append(f"{r['rate']:.3f} [{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]")
            out.append(f"| {n:,} | " + " | ".join(cells) + " |")
    elif part == "power":
        out.append("| n | method | mean delta_min | " + " | ".join(f"ratio {r:g}" for r in RATIOS) + " |")
        out.append("|---|---|---|" + "---|" * len(RATIOS))
        for r in rows:
            out.append(f"| {r['n']:,} | {r['method']} | {r['mean_delta_min']:.3f} | "
                       + " | ".join(f"{r['power'][f'{x:g}']:.2f}" for x in RATIOS) + " |")
        out.append(f"\ndelta* = {rows[0]['delta_star']:.3f} (paper: ~0.45)")
    else:
        keys = ["split/logistic", "split/gbm", "crossfit/logistic", "crossfit/gbm"]
        out.append("| classifier | accuracy | " + " | ".join(f"delta_min {k}" for k in keys) + " |")
        out.append("|---|---|" + "---|" * len(keys))
        for r in rows:
            out.append(f"| {r['classifier']} | {r['accuracy']:.3f} | "
                       + " | ".join(f"{r[k]['delta_min']:.3f}" for k in keys) + " |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("part", nargs="?", default="all", choices=["level", "power", "digits", "all"])
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--power-reps", type=int, default=50)
    ap.add_argument("--out", type=Path, default=Path("bench-output/gof"))
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    parts = ["level", "power", "digits"] if args.part == "all" else [args.part]
    args.out.mkdir(parents=True, exist_ok=True)
    for part in parts:
        t0, c0 = time.perf_counter(), time.process_time()
        with threadpool_limits(limits=1):
            rows = {"level": lambda: level(args.reps), "power": lambda: power(args.power_reps),
                    "digits": digits}[part]()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        (args.out / f"gof_{part}.json").write_text(json.dumps(rows, indent=2) + "\n")
        print(f"\n## gof {part}\n\n{markdown(part, rows)}\n")
        print(f"wall {wall:.0f} s, CPU {cpu:.0f} s, load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
