"""The degenerate-data warning and the indices a warning carries as fields.

stats/ knows model columns and subject or domain codes, not names: a warning keeps its indices
as :class:`Ref` fields (:class:`IndexedWarning`) so that tasks/ can retell it with names
instead of parsing the text. :class:`DegenerateDataWarning` is what a function emits when it
falls back to a documented default.

Everything here is pure Python and numpy; nothing performs I/O.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ._common import _short

__all__ = [
    "REF_LABELS",
    "DegenerateDataWarning",
    "IndexedWarning",
    "Ref",
    "warn_degenerate",
    "warn_indexed",
]


#: How each kind of :class:`Ref` reads in a message ("model column(s) [3, 7]").
REF_LABELS = {
    "model": "model column(s)",
    "subject": "subject(s)",
    "domain": "domain(s)",
    "model pair": "model column pair(s)",
    "comparison": "comparison(s)",
    "fit row": "fit rows",
    "domain model": "(domain, model)",
    "entry": "entries",
    "entries": "entries",
}


@dataclass(frozen=True)
class Ref:
    """Indices a warning refers to, kept as data so a caller that knows names can use them.

    The stats layer knows model columns and subject/domain codes, not names. A warning
    carries its indices as ``Ref`` fields (see :class:`IndexedWarning`); the tasks layer
    maps them to names instead of parsing the text.

    Parameters
    ----------
    kind : str
        One of :data:`REF_LABELS`: ``"model"`` (score-matrix columns), ``"subject"``,
        ``"domain"`` (codes), ``"model pair"`` ((model, versus) column pairs),
        ``"comparison"`` (positions in a family of comparisons), ``"fit row"``,
        ``"domain model"`` ((domain, model) pairs), ``"entry"`` (array entries: "entry [3]",
        "entries [3, 4]") or ``"entries"`` (the same, always "entries").
    indices : tuple
        Every index (ints, or tuples of ints for the pair kinds), in the order listed.
    """

    kind: str
    indices: tuple

    def __post_init__(self):
        if self.kind not in REF_LABELS:
            raise ValueError(f"Ref kind must be one of {sorted(REF_LABELS)}; got {self.kind!r}")
        object.__setattr__(self, "indices", tuple(_plain(v) for v in self.indices))

    @property
    def label(self) -> str:
        """The words before the list ("model column(s)"; "entry" or "entries" by count)."""
        if self.kind == "entry":
            return "entry" if len(self.indices) == 1 else "entries"
        return REF_LABELS[self.kind]

    def __str__(self) -> str:
        return f"{self.label} {_short(self.indices)}"


def _plain(v):
    """numpy integers (and tuples of them) as Python ints, so a Ref prints and compares plainly."""
    if isinstance(v, (tuple, list, np.ndarray)):
        return tuple(int(x) for x in v)
    return int(v) if isinstance(v, (np.integer, int)) else v


class IndexedWarning(Warning):
    """A warning whose text is ``template.format(*refs)``, with the :class:`Ref` fields kept.

    ``str(warning)`` is the full text; ``.template`` and ``.refs`` let a caller that knows
    the names of the columns and codes retell it (tasks/audit/analyses.py ``_named``).
    Built from a plain message (``Category("text")``, as ``warnings.warn(text, Category)``
    does), the template is that message and there are no refs.
    """

    def __init__(self, template: str = "", *refs: Ref):
        self.template = template
        self.refs = tuple(refs)
        super().__init__(template.format(*refs) if refs else template)

    def retold(self, prefix: str = "", refs: tuple[Ref, ...] | None = None) -> IndexedWarning:
        """The same warning (same category) with ``prefix`` before its text and, if given, other
        refs (as many as the template's); for a caller that passes a warning on with context.

        >>> str(DegenerateDataWarning("f: {}", Ref("model", [1])).retold("pooled score: "))
        'pooled score: f: model column(s) [1]'
        """
        refs = self.refs if refs is None else tuple(refs)
        escaped = prefix.replace("{", "{{").replace("}", "}}")
        template = self.template if self.refs else self.template.replace("{", "{{").replace("}", "}}")
        return type(self)(escaped + template, *refs) if refs else type(self)(prefix + str(self))

    def __reduce__(self):
        # Pickled (to a worker process and back) with its fields, not only its text.
        return (_rebuild_indexed, (type(self), self.template, self.refs))


def _rebuild_indexed(cls, template, refs):
    return cls(template, *refs)


class DegenerateDataWarning(IndexedWarning, RuntimeWarning):
    """The data do not support the requested quantity in the usual way.

    Raised (as a warning) when a result falls back to a documented default - a
    zero-width interval, a NaN summary of an empty group, a worst-case bound -
    so that no such value is ever returned silently.
    """


def warn_indexed(category: type[IndexedWarning], template: str, *refs: Ref, stacklevel: int = 2) -> None:
    """Emit ``category(template, *refs)``; ``stacklevel`` counts from this function's caller,
    as for :func:`warnings.warn` called there.

    ``template`` holds one ``{}`` per ref: ``"f: {} answered no subject"`` with
    ``Ref("model", [3])`` reads "f: model column(s) [3] answered no subject".
    """
    warnings.warn(category(template, *refs), stacklevel=stacklevel + 1)


def warn_degenerate(template: str, *refs: Ref, stacklevel: int = 3) -> None:
    """Emit a :class:`DegenerateDataWarning` attributed to the public caller.

    ``template`` holds one ``{}`` per :class:`Ref` in ``refs``; without refs it is the
    message as it is (braces and all).
    """
    warn_indexed(DegenerateDataWarning, template, *refs, stacklevel=stacklevel)
