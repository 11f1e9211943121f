"""The DuckDB store: connection and locking, the schema, codes, export and the matrices read from it.

This package module holds only what the command line needs to build its parser (it must not
import DuckDB or Polars: ``benchcert --help`` answers without them).
"""

#: How long a command waits for another process's lock on the store (seconds), unless told.
DEFAULT_LOCK_TIMEOUT = 600.0
