"""Prefect flows (ingest, audit) and the benchcert CLI; they orchestrate tasks/ and never hold formulas."""
