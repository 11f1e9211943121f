"""Errors that are the user's: raised where the code knows the input or data is wrong.

The taxonomy: :class:`UserError` (exit 1) and its kinds - :class:`UsageError` (2: options that
contradict each other or name nothing), :class:`MissingStoreError` and :class:`StoreUnusableError`
(3: the store), :class:`NoDataError` (1: the store holds nothing that answers), :class:`DataError`
(1: input that cannot be read or used), :class:`NotAnalysableError` (1: an analysis cannot analyse
these data; the audit skips it).  Every feature's error derives from one of them.

The command line reports a :class:`UserError` as one line with its exit code; any other
exception that reaches the top is a bug and is reported as one, with the ``--debug`` hint.
A feature raises a subclass named for what went wrong, never a bare ``KeyError`` or
``IndexError`` (those are bugs).
"""

from __future__ import annotations


class UserError(Exception):
    """The user's input, options or data cannot be used as given (exit code 1 unless overridden).

    Examples
    --------
    >>> import benchcert as bc
    >>> try:
    ...     bc.Store("no-such-folder/none.duckdb").audit("toy")
    ... except bc.UserError as exc:
    ...     print(type(exc).__name__, exc.exit_code)
    MissingStoreError 3
    """

    exit_code: int = 1


class UsageError(UserError):
    """The options given contradict each other or name nothing (exit code 2, as argparse's)."""

    exit_code = 2


class MissingStoreError(UserError):
    """The store file named does not exist: nothing was ingested there yet (exit code 3, the store's)."""

    exit_code = 3


class NoDataError(UserError):
    """The store holds nothing that answers the request: an unknown or empty benchmark, a plan or
    model it does not hold, too few models or shared items (exit code 1)."""

    # Spelled out, as in every kind: a feature error that also derives from another kind (a
    # dashboard's output folder is a DashboardError and a UsageError) takes the first kind's code.
    exit_code = 1


class StoreUnusableError(UserError):
    """The store exists but cannot be used now: locked by another process, of a newer version, not a
    benchcert store, or its disk full (exit code 3)."""

    exit_code = 3


class DataError(UserError):
    """The data given cannot be used as they are: a file that cannot be read or does not validate, a
    mapping that does not fit it, a row contradicting what the store holds (exit code 1)."""

    exit_code = 1


class NotAnalysableError(UserError):
    """An analysis cannot analyse this benchmark's data (too few models, subjects or items for its
    question, no variants, no probabilities): the audit records it as skipped, with this message, and
    runs the others (exit code 1 when a command asks for that analysis alone)."""

    exit_code = 1


def unit_interval_option(flag: str, value, *, closed: bool | str = False) -> float:
    """An option's value (``--alpha``, ``--epsilon``) checked to lie in the unit interval.

    The check is stats/validation.py's :func:`~benchcert.stats.validation.check_unit_interval`,
    so a level is refused in the same words by a command and by the Python functions.

    Parameters
    ----------
    flag : str
        The option as the user wrote it; it starts the message.
    value : real number
        The value given.
    closed : bool or {"neither", "left", "right", "both"}, default False
        Which ends belong to the interval, as for ``check_unit_interval``.

    Returns
    -------
    float

    Raises
    ------
    UsageError
        ``"<flag> must be in (0, 1); got <value>"`` (exit code 2).
    """
    from benchcert.stats.validation import check_unit_interval

    try:
        return check_unit_interval(flag, value, closed=closed)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk is full (ENOSPC), as an OSError or in a library's message
    (DuckDB's IOException, Polars' ComputeError)."""
    import errno

    return getattr(exc, "errno", None) == errno.ENOSPC or "No space left on device" in str(exc)
