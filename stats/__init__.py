"""Pure numpy/scipy statistics: no Prefect, no DuckDB, no I/O. One module per family."""
