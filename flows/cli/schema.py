"""``benchcert schema``: the JSON Schemas of the canonical row and the artifacts."""

from __future__ import annotations

import json
from pathlib import Path

from benchcert.flows.cli.errors import EXIT_OK, print_json

#: The names of tasks/schemas.py's SCHEMAS (tests/flows/test_cli_hygiene.py checks): spelled out so that
#: building the parser does not import pydantic and the models (an ingest never needs them).
SCHEMA_NAMES = ("response-row", "manifest", "summary", "index")


def cmd_schema(args) -> int:
    from benchcert.tasks.schemas import SCHEMAS, json_schema

    names = list(SCHEMAS) if args.name == "all" else [args.name]
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for n in names:
            (out / f"{n}.schema.json").write_text(json.dumps(json_schema(n), indent=2) + "\n", encoding="utf-8")
            print(out / f"{n}.schema.json")
    elif len(names) == 1:
        print_json(json_schema(names[0]))
    else:
        print_json({n: json_schema(n) for n in names})
    return EXIT_OK


def register(sub) -> None:
    sp = sub.add_parser("schema", help="print the JSON Schemas of the canonical row and the artifacts")
    sp.add_argument("name", nargs="?", default="all", choices=["all", *SCHEMA_NAMES])
    sp.add_argument("--out", type=Path, metavar="DIR", help="write <name>.schema.json files here instead")
    sp.set_defaults(func=cmd_schema)
