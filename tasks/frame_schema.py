"""The Polars schema of a flat artifact model, so a table and its pydantic row cannot drift apart."""

from __future__ import annotations

import types
import typing

import polars as pl
from pydantic import BaseModel

_DTYPES = {str: pl.String, int: pl.Int64, float: pl.Float64, bool: pl.Boolean}


def polars_schema(model: type[BaseModel]) -> dict[str, pl.DataType]:
    """``{field: dtype}`` in the model's field order; ``X | None`` fields are nullable ``X`` columns.

    Raises ``TypeError`` for a field that is not a plain str, int, float or bool (optionally
    ``| None``): a nested field has no one-column form.
    """
    schema = {}
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
            annotation, *rest = [a for a in typing.get_args(annotation) if a is not type(None)]
            if rest:
                raise TypeError(f"{model.__name__}.{name}: a union of several types has no one Polars dtype")
        if annotation not in _DTYPES:
            raise TypeError(f"{model.__name__}.{name}: {annotation!r} has no one-column Polars dtype")
        schema[name] = _DTYPES[annotation]
    return schema
