"""The goodness-of-fit test's settings and limits, importable without numpy.

The command line builds its parser from these (``benchcert gof --help`` answers without loading
numpy or scikit-learn); :mod:`benchcert.stats.gof` uses and re-exports them.
"""

#: Fewest hold-out items the test accepts (both versions).  The split version evaluates on
#: half of them.  Below this, the asymptotic normal cut-off is not trusted and the test refuses.
MIN_ITEMS = 200
#: Fewest items per cross-fitting fold (so at most n // 40 folds).
MIN_FOLD_ITEMS = 40

#: Cross-fit variance estimators offered (stats/gof.py's module docstring).
CROSSFIT_VARIANCES = ("adjusted", "paper")

#: Distinguisher procedures offered by name (any scikit-learn classifier may also be passed).
DISTINGUISHERS = ("logistic", "gbm", "rf")
