"""A perturbation audit's (model, tested variant) row as a typed, frozen object.

:class:`~benchcert.tasks.perturbation.service.PerturbationAudit` keeps its rows as a polars table
(``variants``, whose columns and status rule are the service's); :class:`VariantRow` is one of
them for code that reads a result rather than a table (the command line, the Python API). What a
share can say is the row's ``composite_status`` / ``classical_status``, set once by
:func:`~benchcert.tasks.perturbation.service.variant_status_columns`; :meth:`VariantRow.shown_share`
is the one rule for what a table prints in its place when there is no share to print.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

#: What a table prints for a share whose status is not "tested" (a bare 0% would read as "the
#: prompt does not matter").
_SHORT_STATUS = {"no alternative": "no alt."}


@dataclass(frozen=True)
class VariantRow:
    """One model and tested variant of a perturbation audit.

    Attributes
    ----------
    model, variant, base : str
        The model, the tested variant and the design's base variant.
    n_items, n_tested : int
        Items the model answered under the variant; items the composite test could reject at all.
    composite_share, composite_share_bh : float or None
        Share of the tested items where the change matters beyond the null rewordings (raw, and
        with Benjamini-Hochberg across items); None when ``composite_status`` is not "tested".
    composite_status, classical_status : str
        "tested", "no power", "no alternative" (composite only) or "untested".
    classical_tested : int
        Items the classical test (Fisher's exact or the energy test against the base) could reject.
    classical_share, classical_share_bh : float or None
        The classical test's shares.
    no_power, low_power, classical_no_power : str or None
        The sentences saying why items could not be tested, or had little power.
    n_no_power, n_low_power, n_classical_no_power : int
        How many items each sentence is about.
    test_accuracy : float or None
        The model's mean score under the variant.
    alpha : float
    method : str

    Examples
    --------
    >>> from benchcert import VariantRow
    >>> row = VariantRow(model="m", variant="terse", base="base", n_items=40, n_tested=0,
    ...                  composite_share=None, composite_share_bh=None, composite_status="no power",
    ...                  classical_tested=40, classical_share=0.25, classical_share_bh=0.2,
    ...                  classical_status="tested", no_power="too few replicates", n_no_power=40,
    ...                  low_power=None, n_low_power=0, classical_no_power=None, n_classical_no_power=0,
    ...                  test_accuracy=0.6, alpha=0.05, method="calibrated")
    >>> row.shown_share("composite"), row.shown_share("classical"), row.shown_share("classical", bh=True)
    ('no power', '25.0%', '20.0%')
    """

    model: str
    variant: str
    base: str
    n_items: int
    n_tested: int
    composite_share: float | None
    composite_share_bh: float | None
    composite_status: str
    classical_tested: int
    classical_share: float | None
    classical_share_bh: float | None
    classical_status: str
    no_power: str | None
    n_no_power: int
    low_power: str | None
    n_low_power: int
    classical_no_power: str | None
    n_classical_no_power: int
    test_accuracy: float | None
    alpha: float
    method: str

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> "VariantRow":
        """The row from one record of the audit's ``variants`` table (extra columns are ignored)."""
        return cls(**{f.name: row[f.name] for f in fields(cls)})

    def shown_share(self, test: str = "composite", *, bh: bool = False) -> str:
        """The share as a table prints it (``"12.5%"``), or the status in its place when untested.

        ``test`` is "composite" or "classical"; ``bh`` picks the Benjamini-Hochberg share.
        """
        if test not in ("composite", "classical"):
            raise ValueError(f"test must be 'composite' or 'classical', got {test!r}")
        status = self.composite_status if test == "composite" else self.classical_status
        if status != "tested":
            return _SHORT_STATUS.get(status, status)
        share = getattr(self, f"{test}_share{'_bh' if bh else ''}")
        return "-" if share is None else f"{100 * share:.1f}%"
