"""The adapter registry (tasks/ingest/adapters/registry.py) is the one list of ingest formats: detection
asks its adapters, ``--format`` offers its names, docs/cli.md's table and synopsis list them."""

from __future__ import annotations

import re

import pytest

from benchcert.flows.cli import build_parser
from benchcert.tasks.ingest.adapters import registry

from conftest import ROOT

CLI_MD = ROOT / "docs" / "cli.md"


def test_the_docs_table_is_the_registrys():
    assert registry.format_table() in CLI_MD.read_text(), (
        "docs/cli.md's format table differs from registry.format_table(); paste it again:\n"
        + registry.format_table())


def test_the_docs_synopsis_lists_every_format():
    synopsis = re.search(r"\[--format ([a-z_|]+)\]", CLI_MD.read_text())
    assert synopsis is not None
    assert tuple(synopsis.group(1).split("|")) == registry.format_names()


def test_the_cli_offers_exactly_the_registrys_formats():
    parser = build_parser()
    ingest = next(a for a in parser._subparsers._group_actions[0].choices["ingest"]._actions
                  if "--format" in a.option_strings)
    assert tuple(ingest.choices) == registry.format_names()


def test_each_builtin_module_defines_its_adapter():
    assert [a.name for a in registry.adapters()] == list(registry.BUILTIN)
    assert all(a.reads and callable(a.sniff) and callable(a.open) for a in registry.adapters())


def test_a_name_is_registered_once():
    for name in ("csv", "lm_eval"):
        with pytest.raises(ValueError, match="exists already"):
            registry.register(registry.Adapter(name=name, reads="x", sniff=lambda p: None, open=lambda *a: None))
