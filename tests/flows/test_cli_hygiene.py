"""CLI odds and ends of issue 19: --debug for commands that report their own errors; the h* cache
used by ``subsample`` and ``plan subsample`` as by audit; one definition of the exit codes and of
the JSON printer; what a command imports and how the program exits (its latency is measured by
benchmarks/cli_latency.py, not here)."""

from __future__ import annotations

import ast
import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchcert.flows.cli import errors
from benchcert.flows.cli import main
from benchcert.tasks.subsample import hstar_cache

from store_support import cli, cli_store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def store(tmp_path):
    """Two models, 40 items in 4 subjects, one variant."""
    rows = ["model,item_id,subject,score"]
    for m, shift in (("m1", 0), ("m2", 1)):
        for i in range(40):
            rows.append(f"{m},q{i},s{i % 4},{(i * 7 + shift) % 3 == 0:d}")
    return cli_store(tmp_path, "s", rows, "sb")


# --------------------------------------------------------------------------- --debug


ERRORS = [  # commands that catch their own errors to report them in one line
    (["compare", "m1", "m2", "--benchmark", "nope"], 1),
    (["perturb", "--benchmark", "nope"], 1),
    (["plan", "subsample", "--n", "5", "--benchmark", "nope"], 1),
    (["subsample", "--n", "500", "--benchmark", "sb"], 2),
]


@pytest.mark.parametrize("argv,code", ERRORS, ids=[a[0] + (" " + a[1] if a[0] == "plan" else "") for a, _ in ERRORS])
def test_debug_shows_the_traceback_of_a_reported_error(capsys, monkeypatch, store, argv, code):
    monkeypatch.delenv("BENCHCERT_DEBUG", raising=False)
    got, _, err = cli(capsys, *argv, "--db", store)
    assert got == code and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    line = err.strip()

    got, _, err = cli(capsys, *argv, "--db", store, "--debug")
    assert got == code and "Traceback (most recent call last)" in err, err
    assert err.strip().splitlines()[-1] == line  # the same one line ends the output

    monkeypatch.setenv("BENCHCERT_DEBUG", "1")
    got, _, err = cli(capsys, *argv, "--db", store)
    assert got == code and "Traceback (most recent call last)" in err, err


def test_show_traceback_is_silent_without_debug_or_an_error(capsys, monkeypatch):
    monkeypatch.delenv("BENCHCERT_DEBUG", raising=False)
    errors.set_debug(False)
    try:
        raise ValueError("x")
    except ValueError:
        errors.show_traceback()
    errors.set_debug(True)
    try:
        errors.show_traceback()  # nothing being handled
    finally:
        errors.set_debug(False)
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- h* kept beside the store


def _count_worst_case(monkeypatch) -> list:
    """Record every exact h* computation (the expensive core) as (n, N)."""
    from benchcert.stats.subsample import worst_case

    calls = []
    real = worst_case._worst_case_one

    def counting(n, N, *a, **k):
        calls.append((int(n), int(N)))
        return real(n, N, *a, **k)

    monkeypatch.setattr(worst_case, "_worst_case_one", counting)
    return calls


def test_plan_subsample_keeps_and_reads_hstar(capsys, monkeypatch, store):
    from benchcert.stats.subsample import worst_case_halfwidth

    calls = _count_worst_case(monkeypatch)
    code, out, _ = cli(capsys, "plan", "subsample", "--n", "12", "--db", store, "--benchmark", "sb", "--json")
    assert code == 0 and (12, 40) in calls
    first = json.loads(out)
    kept = json.loads(hstar_cache.cache_path(store).read_text())["values"]
    assert "12/40/0.05" in kept

    calls.clear()
    code, out, _ = cli(capsys, "plan", "subsample", "--n", "12", "--db", store, "--benchmark", "sb", "--json")
    assert code == 0 and (12, 40) not in calls  # read, not recomputed
    assert json.loads(out) == first

    # The same plan as without a store (where h* is computed by stats.planning itself).
    code, out, _ = cli(capsys, "plan", "subsample", "--n", "12", "--N", "40", "--json")
    plain = json.loads(out)
    assert {k: v for k, v in plain.items() if k != "source"} == {k: v for k, v in first.items() if k != "source"}
    exact = [a for a in first["answers"] if a["method"] == "exact_worst_case"]
    assert exact and exact[0]["half_width"] == float(worst_case_halfwidth(12, 40).half_width)


def test_subsample_command_keeps_and_reads_hstar(capsys, monkeypatch, store):
    from benchcert.stats.subsample import worst_case_halfwidth

    hstar_cache.save(store, {"7/40/0.05": [0.123, 11]})  # a value only the cache can give
    calls = _count_worst_case(monkeypatch)
    code, out, _ = cli(capsys, "subsample", "--n", "7", "--seed", "1", "--db", store, "--benchmark", "sb", "--json")
    assert code == 0 and (7, 40) not in calls
    assert json.loads(out)["guarantee"]["exact_worst_case_half_width"] == 0.123

    code, out, _ = cli(capsys, "subsample", "--n", "9", "--seed", "1", "--db", store, "--benchmark", "sb", "--json")
    assert code == 0 and (9, 40) in calls
    assert json.loads(out)["guarantee"]["exact_worst_case_half_width"] == float(worst_case_halfwidth(9, 40).half_width)
    assert "9/40/0.05" in json.loads(hstar_cache.cache_path(store).read_text())["values"]


# --------------------------------------------------------------------------- one definition


def test_exit_codes_and_json_printer_are_defined_once():
    defined = {}
    for path in sorted((ROOT / "flows").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            targets = []
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    targets += [e.id for e in (t.elts if isinstance(t, ast.Tuple) else [t]) if isinstance(e, ast.Name)]
            elif isinstance(node, ast.FunctionDef):
                targets = [node.name]
            for name in targets:
                if name.startswith("EXIT_") or name in ("_print_json", "print_json"):
                    defined.setdefault(name, []).append(path.name)
    assert {k: v for k, v in defined.items() if v != ["errors.py"]} == {}
    from benchcert.flows.cli import compare as cli_compare
    from benchcert.flows.cli import runs as cli
    from benchcert.flows.cli import plan as cli_plan
    assert (cli.EXIT_STORE, cli.EXIT_DATA, cli_plan.EXIT_USAGE, cli_compare.EXIT_GATE) == (3, 1, 2, 4)


# --------------------------------------------------------------------------- imports and exit


def test_importing_one_analysis_does_not_import_them_all():
    analysis_modules = ["benchcert.tasks.audit.scores", "benchcert.tasks.hierarchical.analysis",
                        "benchcert.tasks.audit.intervals", "benchcert.tasks.compare.analysis",
                        "benchcert.tasks.perturbation.analysis", "benchcert.tasks.subsample.analysis",
                        "benchcert.tasks.gof.analysis", "benchcert.tasks.certify.analysis"]
    code = ("import sys; import benchcert.tasks.hierarchical.analysis; "
            f"print(sorted(m for m in sys.modules if m in {analysis_modules!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['benchcert.tasks.hierarchical.analysis']"
    from benchcert.tasks.audit.analyses import ANALYSES

    assert list(ANALYSES)[0] == "scores" and len(ANALYSES) >= 8


def _command_imports(argv: list[str], modules: tuple[str, ...]) -> str:
    """``benchcert argv`` run by main() in a fresh interpreter: "<exit code> <which of modules it imported>"."""
    code = ("import sys, contextlib, io; from benchcert.flows.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()): rc = main({argv!r})\n"
            f"print(rc, sorted(m for m in {modules!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1]


def test_an_mmlu_audit_imports_neither_prefect_nor_scipy_stats(mmlu_db, tmp_path):
    """The in-process audit of MMLU-Pro pays for neither import (about 1 s and 0.5 s of CPU)."""
    argv = ["audit", "--db", str(mmlu_db), "--benchmark", "mmlu_pro", "--artifacts", str(tmp_path / "a"),
            "--in-process", "--json"]
    assert _command_imports(argv, ("prefect", "scipy.stats", "scipy.optimize", "sklearn")) == "0 []"


def test_a_compare_of_two_mmlu_models_imports_neither_pandas_nor_scipy_stats(mmlu_db):
    """Issue #40's small question (at most 1 s over the interpreter's start): pyarrow's to_numpy()
    imported pandas in the store's read and the first look's t quantile imported scipy.stats, about
    1 CPU s of a 1.5 CPU s compare together (benchmarks/cli_latency.py)."""
    argv = ["compare", "gemini-1.5-pro-002", "gemini-1.5-flash-002", "--db", str(mmlu_db), "--benchmark",
            "mmlu_pro", "--json"]
    assert _command_imports(argv, ("pandas", "prefect", "scipy.stats", "sklearn")) == "0 []"


def test_main_called_in_process_leaves_the_garbage_collector_alone(capsys):
    before = gc.get_freeze_count()
    assert main(["schema", "summary"]) == 0
    assert gc.get_freeze_count() == before
    # As the program, the exit code and output are what main() returned.
    r = subprocess.run([sys.executable, "-m", "benchcert.flows.cli", "runs", "--db", "/nonexistent/x.duckdb"],
                       capture_output=True, text=True)
    assert r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1


def test_cli_flow_runs_have_no_heartbeat_unless_configured(monkeypatch):
    from prefect.settings import get_current_settings

    from benchcert.flows.prefect_flow import short_run_settings

    monkeypatch.delenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", raising=False)
    default = get_current_settings().flows.heartbeat_frequency
    with short_run_settings():
        assert get_current_settings().flows.heartbeat_frequency is None
    assert get_current_settings().flows.heartbeat_frequency == default
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 60}):  # the user's setting wins
        with short_run_settings():
            assert get_current_settings().flows.heartbeat_frequency == 60


def test_schema_names_of_the_parser_are_the_schemas():
    from benchcert.flows.cli.schema import SCHEMA_NAMES
    from benchcert.tasks.schemas import SCHEMAS

    assert list(SCHEMA_NAMES) == list(SCHEMAS)


def test_help_and_a_small_ingest_import_no_scipy(tmp_path):
    csv = tmp_path / "s.csv"
    csv.write_text("model,item_id,subject,score\nm1,q1,s1,1\nm1,q2,s1,0\n")
    parser_only = ("numpy", "polars", "duckdb", "pydantic", "scipy", "prefect", "sklearn", "benchcert.tasks.schemas")
    for argv, unwanted in ((["--help"], parser_only), (["--version"], parser_only), (["compare"], parser_only),
                           (["gof", "--help"], parser_only), (["export", "--help"], parser_only),
                           (["ingest", str(csv), "--db", str(tmp_path / "s.duckdb"), "--benchmark", "s"],
                            ("scipy", "prefect", "sklearn"))):
        code = ("import sys, contextlib, io; from benchcert.flows.cli import main\n"
                "try:\n    with contextlib.redirect_stdout(io.StringIO()): main(" + repr(argv) + ")\n"
                "except SystemExit: pass\n"
                "print(sorted(m for m in " + repr(unwanted) + " if m in sys.modules))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.strip().splitlines()[-1] == "[]", (argv, out)


def test_build_parser_does_not_skip_a_missing_command_module(monkeypatch):
    """Every listed command module is imported: a missing one is a bug, not a command quietly absent."""
    from benchcert.flows import cli

    monkeypatch.setattr(cli, "COMMAND_MODULES", (*cli.COMMAND_MODULES, "benchcert.flows.cli.no_such_command"))
    with pytest.raises(ImportError):
        cli.build_parser()


def test_the_nightly_inbox_and_ingest_expand_sources_alike(tmp_path):
    from benchcert.flows.nightly import MAPPING_FILE, inbox_files
    from benchcert.tasks.ingest.sources import expand_sources

    (tmp_path / "a.csv").write_text("model,item_id,score\nm,q,1\n")
    (tmp_path / "notes.xyz").write_text("?")
    (tmp_path / MAPPING_FILE).write_text("[map]\n")
    files, unknown = expand_sources([str(tmp_path)])
    assert files == [str(tmp_path / "a.csv")]
    assert sorted(Path(u["path"]).name for u in unknown) == [MAPPING_FILE, "notes.xyz"]
    # The inbox's own mapping file is no source and no unreadable log either.
    assert inbox_files(tmp_path) == (files, [u for u in unknown if Path(u["path"]).name != MAPPING_FILE])

