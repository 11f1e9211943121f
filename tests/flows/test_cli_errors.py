"""User errors are one line on stderr with the documented exit code; --debug shows the traceback.
One rule for the default variant in every command, and a default stored with the benchmark."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from benchcert.flows.cli import main

from conftest import SMALL_CSV, SMALL_MAP
from store_support import cli, cli_store

MAPS = [a for m in SMALL_MAP for a in ("--map", m)]


@pytest.fixture()
def variants_db(tmp_path):
    """Two models, six items, three named variants (no '' variant), as llm-stability's logs are."""
    rows = ["model,item_id,subject,score,variant"]
    for m, shift in (("m1", 0), ("m2", 1)):
        for i in range(6):
            for j, v in enumerate(("a", "b", "c")):
                rows.append(f"{m},q{i},s{i % 2},{(i + j + shift) % 2},{v}")
    return cli_store(tmp_path, "v", rows, "vb")


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_unknown_benchmark_is_one_line_exit_1(capsys, variants_db, tmp_path):
    for argv in (["audit", "--artifacts", tmp_path / "a"], ["compare", "m1", "m2"], ["perturb"]):
        code, _, err = cli(capsys, argv[0], "--db", variants_db, "--benchmark", "nope", *argv[1:])
        line = _one_line(err)
        assert code == 1 and "'nope'" in line and "vb" in line, (argv, err)


def test_several_variants_without_a_choice_is_one_line_exit_1(capsys, variants_db, tmp_path):
    for argv, flag in ((["audit", "--artifacts", tmp_path / "a"], "--variant"), (["compare", "m1", "m2"], "--variant"),
                       (["perturb"], "--base")):
        code, _, err = cli(capsys, argv[0], "--db", variants_db, "--benchmark", "vb", *argv[1:])
        line = _one_line(err)
        assert code == 1 and "several variants" in line and flag in line and "default-variant" in line


def test_unknown_model_and_bad_option_values(capsys, variants_db):
    code, _, err = cli(capsys, "compare", "m1", "zz", "--db", variants_db, "--benchmark", "vb", "--variant", "a")
    assert code == 1 and "zz" in _one_line(err)
    for argv in (["audit", "--db", variants_db, "--benchmark", "vb", "--alpha", "x"],
                 ["audit", "--db", variants_db, "--benchmark", "vb", "--alpha", "2"],
                 ["compare", "m1", "m2", "--db", variants_db, "--benchmark", "vb", "--hierarchy", "bad"],
                 ["ingest", SMALL_CSV, "--db", variants_db, "--format", "xls"]):
        try:
            code, _, err = cli(capsys, *argv)
        except SystemExit as e:  # argparse's own checks
            code, err = e.code, capsys.readouterr().err
        assert code == 2, argv
        assert "--" in _one_line(err)


def test_debug_shows_the_traceback(capsys, variants_db, tmp_path, monkeypatch):
    from benchcert.tasks.store.matrices import MatrixError

    with pytest.raises(MatrixError):
        main(["audit", "--db", str(variants_db), "--benchmark", "nope", "--artifacts", str(tmp_path / "a"), "--debug"])
    monkeypatch.setenv("BENCHCERT_DEBUG", "1")
    with pytest.raises(MatrixError):
        main(["audit", "--db", str(variants_db), "--benchmark", "vb", "--artifacts", str(tmp_path / "a")])


def test_unexpected_errors_are_one_line_too(capsys, monkeypatch, variants_db, tmp_path):
    import benchcert.flows.runs as runs

    def boom(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(runs, "audit_body", boom)
    code, _, err = cli(capsys, "audit", "--db", variants_db, "--benchmark", "vb", "--artifacts", tmp_path / "a")
    line = _one_line(err)
    assert code == 1 and "disk on fire" in line and "--debug" in line


@pytest.mark.parametrize("bug", [KeyError("k"), IndexError("off by one"), TypeError("wrong call"),
                                 AttributeError("no attribute")])
def test_a_bug_is_reported_as_unexpected_not_as_the_users_mistake(capsys, monkeypatch, variants_db, tmp_path, bug):
    """Issue #23 finding 6: a KeyError or IndexError from benchcert's own code is a bug, not a user error."""
    import benchcert.flows.runs as runs

    def boom(*a, **k):
        raise bug

    monkeypatch.setattr(runs, "audit_body", boom)
    code, _, err = cli(capsys, "audit", "--db", variants_db, "--benchmark", "vb", "--artifacts", tmp_path / "a")
    line = _one_line(err)
    assert code == 1 and "unexpected error" in line and type(bug).__name__ in line and "--debug" in line


@pytest.mark.parametrize("exc, code", [("UserError", 1), ("UsageError", 2), ("MissingStoreError", 3)])
def test_a_user_error_is_one_line_with_its_own_exit_code(capsys, monkeypatch, variants_db, tmp_path, exc, code):
    import benchcert.flows.runs as runs
    from benchcert.tasks import errors as user_errors

    def refuse(*a, **k):
        raise getattr(user_errors, exc)("the user's mistake")

    monkeypatch.setattr(runs, "audit_body", refuse)
    got, _, err = cli(capsys, "audit", "--db", variants_db, "--benchmark", "vb", "--artifacts", tmp_path / "a")
    assert got == code and _one_line(err) == "benchcert audit: the user's mistake"


def test_prefect_mode_error_is_one_line_too(variants_db, tmp_path):
    """Under Prefect (a temporary API here) a failing task logs a traceback to the console; not without --debug."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_HOME"] = str(tmp_path / "ph")
    r = subprocess.run([sys.executable, "-m", "benchcert.flows.cli", "audit", "--db", str(variants_db),
                        "--benchmark", "vb", "--artifacts", str(tmp_path / "a"), "--prefect"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1
    assert "several variants" in _one_line(r.stderr)


def test_default_variant_is_stored_once_and_used_everywhere(capsys, variants_db, tmp_path):
    code, out, _ = cli(capsys, "default-variant", "--db", variants_db, "--benchmark", "vb", "--json")
    assert code == 0 and json.loads(out) == {"benchmark": "vb", "default_variant": None, "variants": ["a", "b", "c"]}
    code, _, err = cli(capsys, "set-default-variant", "--db", variants_db, "--benchmark", "vb", "zz")
    assert code == 1 and "no variant 'zz'" in _one_line(err)
    assert cli(capsys, "set-default-variant", "--db", variants_db, "--benchmark", "vb", "b")[0] == 0
    code, out, _ = cli(capsys, "audit", "--db", variants_db, "--benchmark", "vb", "--artifacts", tmp_path / "a",
                       "--json")
    assert code == 0 and json.loads(out)["variant"] == "b"
    code, out, _ = cli(capsys, "compare", "m1", "m2", "--db", variants_db, "--benchmark", "vb", "--json")
    assert code == 0 and json.loads(out)["variant"] == "b"
    code, out, _ = cli(capsys, "perturb", "--db", variants_db, "--benchmark", "vb", "--json")
    assert code == 0 and json.loads(out)["design"]["base"] == "b"
    # The command line still wins over the stored default.
    code, out, _ = cli(capsys, "compare", "m1", "m2", "--db", variants_db, "--benchmark", "vb", "--variant", "c",
                       "--json")
    assert json.loads(out)["variant"] == "c"
    assert cli(capsys, "default-variant", "--db", variants_db, "--benchmark", "vb", "--clear")[0] == 0
    code, _, err = cli(capsys, "audit", "--db", variants_db, "--benchmark", "vb", "--artifacts", tmp_path / "a")
    assert code == 1 and "several variants" in err


def test_deployment_audit_uses_the_stored_default(variants_db, tmp_path):
    """The deployments audit with variant=None: the same rule (plain flow body, as the deployments run it)."""
    from benchcert.flows.bodies import audit_body
    from benchcert.tasks.audit.request import AuditRequest
    from benchcert.tasks.audit.steps import plain_steps
    from benchcert.tasks.store.connection import open_store, set_default_variant

    with open_store(variants_db, write=True) as con:
        set_default_variant(con, "vb", "c")
    out = audit_body(plain_steps(), AuditRequest(db=str(variants_db), benchmark="vb", artifacts_root=str(tmp_path / "a"),
                                                 alpha=0.05, variant=None, lock_timeout=60.0))
    assert out["variant"] == "c"


def test_audit_perturbation_base_is_the_audited_variant(variants_db, tmp_path):
    """With a stored default 'b', the audit reads 'b' and its perturbation analysis uses 'b' as the base."""
    import polars as pl

    from benchcert.tasks.store.connection import open_store, set_default_variant

    with open_store(variants_db, write=True) as con:
        set_default_variant(con, "vb", "b")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["audit", "--db", str(variants_db), "--benchmark", "vb", "--artifacts", str(tmp_path / "a")]) == 0
    (table,) = list((tmp_path / "a").rglob("perturbation_variants.parquet"))
    frame = pl.read_parquet(table)
    assert set(frame["base"]) == {"b"} and set(frame["variant"]) == {"a", "c"}


def test_a_reader_that_goes_away_gets_no_traceback():
    """`benchcert schema all | head -1`: the closed pipe ends the command quietly (exit 141)."""
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "benchcert.flows.cli", "schema", "all"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141 and "Traceback" not in err and "BrokenPipe" not in err, err
