"""I/O and Prefect tasks: the DuckDB store, log adapters, validation, matrices, analyses, artifacts, report."""
