"""Add run_leases: who works for which run, renewed by a heartbeat while they work.

Each process working for a run (the CLI's whole run, or one task of a scheduler's run on any
worker) takes a lease naming itself (worker, pid, process identity), renews it every few seconds
with what it is doing, and releases it when done. A lease neither released nor renewed within its
length names a worker that died at work: the next run (or `restoreproof reap`) removes what that
worker left and records its database as "error", killed; a live worker's lease keeps its targets
from every reaper. Times are the store's own clock.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# The store's UtcDateTime on the database side, kept here: a later change to the store's Python code
# must not change what this revision made.
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "run_leases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("process", sa.String(length=128), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("database", sa.String(length=256), nullable=True),
        sa.Column("phase", sa.Text(), nullable=True),
        sa.Column("generation", sa.String(length=32), nullable=True),
        sa.Column("lease_seconds", sa.Float(), nullable=False),
        sa.Column("acquired_at", TIMESTAMP, nullable=False),
        sa.Column("heartbeat_at", TIMESTAMP, nullable=False),
        sa.Column("released_at", TIMESTAMP, nullable=True),
        sa.Column("ended", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_run_leases_run_id"), "run_leases", ["run_id"], unique=False)
    op.create_index(op.f("ix_run_leases_released_at"), "run_leases", ["released_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_run_leases_released_at"), table_name="run_leases")
    op.drop_index(op.f("ix_run_leases_run_id"), table_name="run_leases")
    op.drop_table("run_leases")
