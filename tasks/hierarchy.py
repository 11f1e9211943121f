"""The clustering levels an analysis may treat as exchangeable clusters: the one home of the hierarchy.

A hierarchy is a tuple of levels, coarsest last: ``("subject", "domain")`` (the default: items in
subjects in domains), ``("subject",)`` (domains ignored) or ``()`` (no clustering: items only).
The command line names them ``subject,domain``, ``subject`` and ``none``.  The audit's settings,
compare's request and the checkpoint verdict's settings all check a hierarchy here.
"""

from __future__ import annotations

#: Each hierarchy by the name the command line gives it, the default first.
HIERARCHY_NAMES: dict[str, tuple[str, ...]] = {"subject,domain": ("subject", "domain"), "subject": ("subject",),
                                               "none": ()}
#: The hierarchies, as tuples of levels.
HIERARCHIES: tuple[tuple[str, ...], ...] = tuple(HIERARCHY_NAMES.values())
#: What an analysis clusters over when nothing is asked: subjects, and domains above them.
DEFAULT_HIERARCHY: tuple[str, ...] = HIERARCHIES[0]
#: The levels a hierarchy may name (canonical fields of the store).
LEVELS: tuple[str, ...] = DEFAULT_HIERARCHY


def check_hierarchy(levels, name: str = "hierarchy") -> tuple[str, ...]:
    """``levels`` as a hierarchy tuple; ValueError naming ``name`` and the value when it is none of
    :data:`HIERARCHIES`."""
    value = tuple(levels)
    if value not in HIERARCHIES:
        raise ValueError(f"{name} must be subject,domain / subject / none; got {levels!r}")
    return value
