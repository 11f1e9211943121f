"""The perturbation analysis' audit option: which test and which design (``options={"perturbation": ...}``).

Declared on the analysis' registry entry (tasks/audit/analyses.py), so an audit request with a
bad method or design is refused when it is made, not when the analysis runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: The composite tests an audit may ask for (stats/perturbation/item_test.py TEST_METHODS; kept
#: here as text so that a request is checked without importing scipy).
METHODS = ("calibrated", "widened", "plugin_exact", "plugin_union")
DEFAULT_METHOD = "calibrated"


@dataclass(frozen=True)
class PerturbationOption:
    """How the audit's perturbation analysis tests the prompt variants.

    Attributes
    ----------
    method : str
        The composite test, one of :data:`METHODS`.
    base : str or None
        The base variant (None: the variant the audit reads, as without a design).
    null, test : tuple of str or None
        The null and tested variants (None: every variant / every variant but the base).
    """

    method: str = DEFAULT_METHOD
    base: str | None = None
    null: tuple[str, ...] | None = None
    test: tuple[str, ...] | None = None

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"perturbation method must be one of {', '.join(METHODS)}; got {self.method!r}")
        if self.base is not None and not isinstance(self.base, str):
            raise ValueError(f"perturbation base must be a variant name; got {self.base!r}")
        for part in ("null", "test"):
            names = getattr(self, part)
            if names is None:
                continue
            if isinstance(names, str) or not all(isinstance(n, str) for n in names):
                raise ValueError(f"perturbation {part} must be a list of variant names; got {names!r}")
            object.__setattr__(self, part, tuple(names))

    @property
    def has_design(self) -> bool:
        """True when the option names any variant (else the default leave-one-out design is used)."""
        return self.base is not None or bool(self.null) or bool(self.test)

    def as_dict(self) -> dict:
        """The option as a request gives it (JSON)."""
        return {"method": self.method, "base": self.base, "null": None if self.null is None else list(self.null),
                "test": None if self.test is None else list(self.test)}


def parse_option(value) -> PerturbationOption:
    """``value`` (a mapping with ``method``, ``base``, ``null``, ``test``, or an option) as an option.

    Raises
    ------
    ValueError
        An unknown key, method or a part that is not a variant name (list).
    """
    if isinstance(value, PerturbationOption):
        return value
    if not isinstance(value, Mapping):
        raise ValueError(f"the perturbation option is a mapping of method, base, null, test; got {value!r}")
    unknown = sorted(set(value) - {"method", "base", "null", "test"})
    if unknown:
        raise ValueError(f"unknown perturbation option key(s) {unknown}; known: method, base, null, test")
    return PerturbationOption(**value)
