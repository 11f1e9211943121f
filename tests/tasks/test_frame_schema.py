"""tasks/frame_schema.polars_schema: a table's columns derived from its artifact row."""

import polars as pl
import pytest
from pydantic import BaseModel

from benchcert.tasks.frame_schema import polars_schema
from benchcert.tasks.parsing.analysis import PARSE_FAILURES_SCHEMA
from benchcert.tasks.schemas import ParseFailures


class _Row(BaseModel):
    name: str
    n: int
    share: float | None = None
    warn: bool = False


class _Nested(BaseModel):
    row: _Row


def test_fields_in_order_with_optional_as_nullable_columns():
    assert list(polars_schema(_Row).items()) == [
        ("name", pl.String), ("n", pl.Int64), ("share", pl.Float64), ("warn", pl.Boolean)]


def test_a_nested_field_is_refused_by_name():
    with pytest.raises(TypeError, match=r"_Nested\.row"):
        polars_schema(_Nested)


def test_the_parse_failures_table_has_exactly_the_artifact_rows_fields():
    assert list(PARSE_FAILURES_SCHEMA) == list(ParseFailures.model_fields)
    assert PARSE_FAILURES_SCHEMA["n_unparsed"] == pl.Int64 and PARSE_FAILURES_SCHEMA["warn"] == pl.Boolean
