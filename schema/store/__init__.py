"""The store: its tables and Alembic migrations, opening a store, writing and reading runs,
events and points (chunks, rollups, buckets, envelopes), what a stored run row means (its
status, its process's liveness), and the file rules every file written for a user follows.

No module here imports schema/rules/ (tests/test_floors.py). This file stays empty: the stdlib
modules (columns, chunk_read, envelope, ...) import without SQLAlchemy, as the agent's archive
and `reslog ls` need.
"""
