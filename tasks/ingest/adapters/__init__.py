"""tasks/ingest/adapters"""
