"""What a comparison asks besides which models on which benchmark(s): the settings
:class:`~benchcert.tasks.compare.service.CompareRequest` (one benchmark) and
:class:`~benchcert.tasks.compare.suite.SuiteRequest` (a suite) share, declared once.

A leaf module (the gate's options only): the command line builds its parser without numerics.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from benchcert.tasks.compare.gate import GateOptions
from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT

__all__ = ["CompareSettings", "settings_of"]


@dataclass(frozen=True, kw_only=True)
class CompareSettings:
    """The shared settings of a comparison (keyword-only, after the request's own fields).

    Attributes
    ----------
    alpha, power : float
        Level and the power of the minimum detectable effect.
    variant : str or None
        Prompt variant (None: the benchmark's default, else the only one, else '').
    hierarchy : str
        A key of :data:`benchcert.tasks.compare.service.HIERARCHIES`: what the primary interval
        clusters over.
    lock_timeout : float
        Seconds to wait for another process using the store.
    gate : GateOptions or None
        The CI gate asked for, if any.
    question : str
        A member of :data:`benchcert.tasks.compare.service.QUESTION_CHOICES`: what every verdict
        answers.
    """

    alpha: float = 0.05
    power: float = 0.8
    variant: str | None = None
    hierarchy: str = "subject,domain"
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    gate: GateOptions | None = None
    question: str = "items"


def settings_of(request: CompareSettings) -> dict:
    """``request``'s shared settings as keyword arguments (to ask the same of another request)."""
    return {f.name: getattr(request, f.name) for f in fields(CompareSettings)}
