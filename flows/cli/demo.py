"""``benchcert demo``: the bundled MMLU-Pro logs ingested into a new store and audited.

The first thing a newcomer runs, from a checkout (``make demo``) or an installed wheel alike: the
logs ship inside the package (``benchcert.data``, read with importlib.resources), and the two
steps are the ``ingest`` and ``audit --items`` commands themselves, run with the options a user would
type, so what the demo prints and stores is exactly what those commands give.

Exit codes as in flows/cli/errors.py: 0 success; 1 the bundled data is missing from this
installation, or the ingest or the audit failed; 2 ``--dir`` is not a folder that can be used, or
already holds a store (the demo never writes into, nor removes, an existing store); 3 the new
store is locked or unusable.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from benchcert.flows.cli.errors import EXIT_OK
from benchcert.flows.cli.options import command, run_mode_options
from benchcert.tasks.errors import DataError, UsageError

BENCHMARK = "mmlu_pro"
STORE = "benchcert.duckdb"
ARTIFACTS = "artifacts"
DEFAULT_DIR = Path("benchcert-demo")
#: The bundled files the demo reads, inside package benchcert.data (pyproject.toml's package-data).
LOGS = ("mmlu_pro", "mmlu_pro_item_correctness_long.csv.gz")
MAPPING = ("mmlu_pro", "mapping.toml")
#: Two models 0.46 points apart (README's tour): the comparison the demo suggests next.
NEXT_COMPARE = ("Meta-Llama-3_1-70B", "Meta-Llama-3-70B")


class MissingDemoDataError(DataError):
    """The bundled data is not in this installation (exit code 1): a broken or trimmed install."""


def prepare_dir(folder: Path) -> Path:
    """Create ``folder`` if needed and return the path of the demo's store inside it.

    Parameters
    ----------
    folder : Path
        The ``--dir`` given.

    Returns
    -------
    Path
        ``folder / benchcert.duckdb``, which does not exist yet.

    Raises
    ------
    UsageError
        ``folder`` is a file, cannot be created, or already holds a store: a store there may be
        the user's own, so the demo neither adds the MMLU-Pro logs to it nor replaces it.
    """
    store = folder / STORE
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--dir {folder}: not a folder")
    for existing in (store, store.with_name(store.name + ".wal")):
        if existing.exists():
            raise UsageError(f"--dir {folder} already holds a store ({existing}); the demo only writes a new "
                             "one: remove it, or choose another --dir")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--dir {folder}: cannot create it ({exc.strerror or exc})") from None
    return store


@contextlib.contextmanager
def bundled(*parts: str):
    """A bundled data file as a path on disk, for the duration of the ``with`` block.

    Raises
    ------
    MissingDemoDataError
        The file is not in the installed package ``benchcert.data``.
    """
    import importlib.resources

    try:
        resource = importlib.resources.files("benchcert.data").joinpath(*parts)
    except ModuleNotFoundError:  # an installation built without the data package
        raise MissingDemoDataError("the bundled demo data (package benchcert.data) is missing from this "
                                   "installation of benchcert; reinstall it") from None
    if not resource.is_file():
        raise MissingDemoDataError(f"the bundled demo data {resource} is missing from this installation of "
                                   "benchcert; reinstall it")
    with importlib.resources.as_file(resource) as path:
        yield path


def run_command(argv: list[str]) -> int:
    """Run one benchcert command in this process (parsed as typed); its exit code."""
    from benchcert.flows.cli import build_parser

    args = build_parser().parse_args(argv)
    return args.func(args)


def cmd_demo(args) -> int:
    """Ingest the MMLU-Pro item-level results bundled with benchcert (29 models, 12,032 items; Apache-2.0, see
    the SOURCE.txt beside them) into a new store DIR/benchcert.duckdb, audit them (with --items) into
    DIR/artifacts, and print the audit's table and the report's path: the same as `benchcert ingest` and
    `benchcert audit` with those files. A DIR that already holds a store is refused (exit 2); nothing in DIR
    is removed."""
    # A missing data file (MissingDemoDataError) or an unusable --dir (UsageError) reaches main().
    with bundled(*LOGS) as logs, bundled(*MAPPING) as mapping:
        store = prepare_dir(args.dir)
        mode = [] if args.prefect is None else ["--prefect" if args.prefect else "--in-process"]
        print(f"benchcert demo: the bundled MMLU-Pro logs into {store}", flush=True)
        # (--opt=value: a --dir starting with "-" must not read as an option)
        code = run_command(["ingest", str(logs), f"--db={store}", f"--benchmark={BENCHMARK}",
                            f"--config={mapping}", *mode])
    if code != EXIT_OK:
        return code
    code = run_command(["audit", f"--db={store}", f"--benchmark={BENCHMARK}", f"--artifacts={args.dir / ARTIFACTS}",
                        "--items", *mode])
    if code != EXIT_OK:
        return code
    a, b = NEXT_COMPARE
    print(f"demo: store {store}; open the report above in a browser. Next, is {a} better than {b}?\n"
          f"    benchcert compare {a} {b} --db {store} --benchmark {BENCHMARK}")
    return EXIT_OK


def register(sub) -> None:
    sp = command(sub, "demo", cmd_demo,
                 help="ingest and audit the bundled MMLU-Pro logs into a new store (a first run)")
    sp.add_argument("--dir", type=Path, default=DEFAULT_DIR, metavar="DIR",
                    help=f"folder for the store and the artifacts, created if needed (default ./{DEFAULT_DIR})")
    run_mode_options(sp)
