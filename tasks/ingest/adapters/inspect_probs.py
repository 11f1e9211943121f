"""Option probabilities of an inspect_ai multiple-choice sample, from the logprobs of its answer token.

inspect_ai keeps, when the model was asked for them (``logprobs=True, top_logprobs=k``), the
log-probability of every output token and of the ``k`` most likely alternatives
(``output.choices[0].logprobs.content[i] = {token, logprob, top_logprobs: [{token, logprob}]}``).
For a multiple-choice sample (``choices`` = the options, answered with a letter A, B, ...),
the option probabilities are read at the answer token: the first token that is an option
letter right after the text ``ANSWER:`` (inspect_ai's multiple-choice template), else the
first token that is an option letter.  The alternatives' log-probabilities of the option
letters are exponentiated and divided by their sum; a letter outside the top ``k`` gets
probability 0.  The correct option is the sample's ``target`` letter.

Nothing is read (None) when the sample has no choices, no logprobs or no answer token; such
samples keep their score and simply have no probabilities.
"""

from __future__ import annotations

import math
import string
from typing import Any


def _letters(n: int) -> list[str]:
    return list(string.ascii_uppercase[:n])


def _answer_token(content: list, letters: set[str]) -> dict | None:
    text, first = "", None
    for tok in content:
        if not isinstance(tok, dict) or not isinstance(tok.get("token"), str):
            return None
        t = tok["token"].strip()
        if t in letters:
            if text.rstrip().upper().endswith("ANSWER:"):
                return tok
            if first is None:
                first = tok
        text += tok["token"]
    return first


def option_probs(sample: dict) -> tuple[list[float] | None, int | None]:
    """(probabilities over the sample's options, index of the correct option) or (None, None)."""
    choices = sample.get("choices")
    if not isinstance(choices, list) or not 2 <= len(choices) <= 26:
        return None, None
    out = sample.get("output")
    try:
        content = out["choices"][0]["logprobs"]["content"]
    except (KeyError, IndexError, TypeError):
        return None, None
    if not isinstance(content, list) or not content:
        return None, None
    letters = _letters(len(choices))
    tok = _answer_token(content, set(letters))
    if tok is None:
        return None, None
    alts = tok.get("top_logprobs") or [{"token": tok.get("token"), "logprob": tok.get("logprob")}]
    best: dict[str, float] = {}
    for alt in alts:
        if not isinstance(alt, dict) or not isinstance(alt.get("token"), str):
            continue
        lp = alt.get("logprob")
        t = alt["token"].strip()
        if t in letters and isinstance(lp, (int, float)) and not isinstance(lp, bool) and math.isfinite(lp) and lp <= 0:
            best[t] = max(best.get(t, -math.inf), float(lp))  # " A" and "A" are the same answer
    if not best:
        return None, None
    top = max(best.values())
    weights = [math.exp(best[k] - top) if k in best else 0.0 for k in letters]
    total = sum(weights)
    probs = [w / total for w in weights]
    target = sample.get("target")
    if isinstance(target, list) and len(target) == 1:
        target = target[0]
    label = letters.index(target.strip()) if isinstance(target, str) and target.strip() in letters else None
    return probs, label
