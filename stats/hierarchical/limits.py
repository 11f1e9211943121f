"""The precision range every beta fit searches and the worst-case proxy (Hoeffding's lemma)."""

from __future__ import annotations

import math

__all__ = ["NU_MAX", "NU_MIN", "WORST_CASE_S2"]

#: Precision a + b at which an under-dispersed domain's fit is stopped (its MLE is at
#: infinity). The proxy there is 1/(4 (1e6 + 1)) = 2.5e-7: subject accuracies that agree to
#: within a twentieth of a percentage point, i.e. no detectable subject spread.
NU_MAX = 1e6
#: Smallest precision searched. A Beta with a + b -> 0 tends to a two-point law on {0, 1},
#: whose proxy 1/(4 (a + b + 1)) tends to the worst case 1/4.
NU_MIN = 1e-4
#: Worst-case sub-Gaussian proxy of any [0, 1]-valued variable (Hoeffding's lemma).
WORST_CASE_S2 = 0.25

_LOG_NU_MIN, _LOG_NU_MAX = math.log(NU_MIN), math.log(NU_MAX)
_LOGIT_MAX = 25.0  # |logit mean| cap: means within ~1e-11 of 0 or 1
