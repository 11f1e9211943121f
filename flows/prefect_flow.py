"""benchcert's Prefect flow decorator and the Prefect settings of a run started at a terminal.

:func:`flow` is ``prefect.flow`` with parameters recorded without importing FastAPI;
:func:`prefect_env` and :func:`short_run_settings` are what a command sets before it starts a
flow run.  Nothing here imports Prefect at import time.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys


def prefect_env() -> None:
    """Quiet, offline defaults for Prefect; the caller's settings win."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_UI_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")


def flow(**options):
    """``prefect.flow(**options)`` for benchcert's flows: the same Prefect flow, whose parameters are
    recorded on the flow run without importing FastAPI when they are plain JSON values.

    Prefect records a flow run's parameters with FastAPI's ``jsonable_encoder``, and importing
    FastAPI for it took 0.2-0.6 CPU s of a command's start (benchmarks/cli_latency.py).  Our flows
    take strings, numbers, lists and dicts of them (and dataclasses of those: an ingest's column
    mapping; a pydantic model: an audit's request), which that encoder returns unchanged (a
    dataclass as its ``dataclasses.asdict``, a model as its JSON dump, a tuple as a list);
    :func:`json_parameter` builds exactly that.  Any other value goes to
    Prefect's own serialisation, so what the API records is the same either way
    (tests/flows/test_run_modes.py compares the two).
    """
    cls = _json_parameter_flow()
    return lambda fn: cls(fn=fn, **options)


def __getattr__(name: str):
    # ``JsonParameterFlow`` is made on first use (it subclasses Prefect's Flow, and this module must
    # not import Prefect), and can be found here by name, e.g. when a flow is unpickled.
    if name == "JsonParameterFlow":
        return _json_parameter_flow()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _json_parameter_flow() -> type:
    from prefect.flows import Flow

    class JsonParameterFlow(Flow):
        """A Prefect Flow that serialises JSON-like parameters itself (see :func:`flow`)."""

        def serialize_parameters(self, parameters):
            plain, other = {}, {}
            for key, value in parameters.items():
                try:
                    plain[key] = json_parameter(value)
                except _NotJson:
                    other[key] = value
            if other:  # includes the bound self of a method flow, which Prefect leaves out
                plain.update(super().serialize_parameters(other))
            return {key: plain[key] for key in parameters if key in plain}

    JsonParameterFlow.__module__, JsonParameterFlow.__qualname__ = __name__, "JsonParameterFlow"
    return JsonParameterFlow


class _NotJson(Exception):
    pass


_JSON_SCALARS = (str, int, float, bool, type(None))


def json_parameter(value, _depth: int = 0):
    """``value`` as FastAPI's ``jsonable_encoder`` returns it, for JSON-like values (raises _NotJson else).

    Exact types only (an Enum, a str or int subclass, a Path: Prefect's own path), dict keys
    that are strings not starting with ``_sa`` (which the encoder drops), lists and tuples
    (both become lists), dataclass instances (as their ``dataclasses.asdict``) and pydantic
    models (an audit's request: as their ``model_dump(mode="json", by_alias=True)``).
    """
    import dataclasses

    if _depth > 50:
        raise _NotJson
    if type(value) in _JSON_SCALARS:
        return value
    if type(value) in (list, tuple):
        return [json_parameter(v, _depth + 1) for v in value]
    if type(value) is dict:
        if not all(type(k) is str and not k.startswith("_sa") for k in value):
            raise _NotJson
        return {k: json_parameter(v, _depth + 1) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json_parameter(dataclasses.asdict(value), _depth + 1)
    pydantic = sys.modules.get("pydantic")  # (a pydantic model exists only once pydantic is imported)
    if pydantic is not None and isinstance(value, pydantic.BaseModel):
        # the encoder's own call for a model, whose result it walks as we do here
        return json_parameter(value.model_dump(mode="json", by_alias=True), _depth + 1)
    raise _NotJson


@contextlib.contextmanager
def short_run_settings():
    """Prefect settings for a flow run started by a command at a terminal (seconds long).

    Flow-run heartbeats are off unless the user set ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` (in
    the environment or the profile): they exist to notice a crashed run minutes later (the
    first one is due after 180 s, past the end of such a run), and Prefect's heartbeat thread
    sleeps in one-second steps, so ending the flow waited for it up to a second (0.5 s on
    average).  Deployments started by ``benchcert serve`` keep Prefect's defaults.
    """
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, get_current_settings, temporary_settings

    if "heartbeat_frequency" in get_current_settings().flows.model_fields_set:
        yield
        return
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield
