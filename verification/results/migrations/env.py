"""Alembic's entry point for the results store: always online, on the connection ResultStore passes in.

The connection is already inside the transaction that holds the store's migration lock, so Alembic
runs every step in it and commits nothing itself (see verification.results.migrations.upgrade)."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from verification.results.migrations import VERSION_TABLE
from verification.results.store import Base

connection = context.config.attributes.get("connection")
if context.is_offline_mode() or not isinstance(connection, Connection):
    raise RuntimeError("the results store's migrations run on a connection passed in by "
                       "verification.results.migrations (no alembic.ini, no offline SQL)")
context.configure(connection=connection, target_metadata=Base.metadata, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
