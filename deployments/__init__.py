"""Prefect deployment definitions: the nightly schedule and the checkpoint trigger (not built yet)."""
