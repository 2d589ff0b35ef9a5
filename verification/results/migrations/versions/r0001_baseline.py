"""The schema of restoreproof 0.1.0, exactly as its create_all made it (stores made then are stamped here).

Revision ID: 0001
Revises:
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Timestamps: the store's UtcDateTime is this type on the database side; a migration keeps its own
# types, so that a later change to the store's Python code cannot change what an old revision made.
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("engine", sa.String(length=32), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("target_kind", sa.String(length=32), nullable=True),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.Column("finished_at", TIMESTAMP, nullable=True),
        sa.Column("report_dir", sa.Text(), nullable=True),
        sa.Column("host", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_runs_run_id", "runs", ["run_id"], unique=True)
    op.create_table(
        "databases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("database", sa.String(length=256), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("reasons", sa.JSON(), nullable=False),
        sa.Column("restore_target", sa.String(length=64), nullable=False),
        sa.Column("restore_achieved", TIMESTAMP, nullable=True),
        sa.Column("recovery_seconds", sa.Float(), nullable=True),
        sa.Column("target", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_databases_database", "databases", ["database"])
    op.create_index("ix_databases_run_pk", "databases", ["run_pk"])
    op.create_table(
        "database_reports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("database", sa.String(length=256), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_database_reports_run_pk", "database_reports", ["run_pk"])
    create_detail_tables()


def create_detail_tables() -> None:
    """chains, phases and checks: written by 0.1.0, never read; 0002 drops them, its downgrade makes them again."""
    op.create_table(
        "chains",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("database_pk", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("stop_at", TIMESTAMP, nullable=True),
        sa.Column("backups", sa.JSON(), nullable=False),
        sa.Column("problems", sa.JSON(), nullable=False),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("wal", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["database_pk"], ["databases.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_chains_database_pk", "chains", ["database_pk"])
    op.create_table(
        "phases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("database_pk", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=True),
        sa.Column("bytes", sa.BigInteger(), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["database_pk"], ["databases.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_phases_database_pk", "phases", ["database_pk"])
    op.create_table(
        "checks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("database_pk", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("required", sa.Boolean(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("findings", sa.JSON(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("evidence", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["database_pk"], ["databases.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_checks_database_pk", "checks", ["database_pk"])


def drop_detail_tables() -> None:
    for table in ("checks", "phases", "chains"):
        op.drop_index(f"ix_{table}_database_pk", table_name=table)
        op.drop_table(table)


def downgrade() -> None:
    drop_detail_tables()
    op.drop_index("ix_database_reports_run_pk", table_name="database_reports")
    op.drop_table("database_reports")
    op.drop_index("ix_databases_run_pk", table_name="databases")
    op.drop_index("ix_databases_database", table_name="databases")
    op.drop_table("databases")
    op.drop_index("ix_runs_run_id", table_name="runs")
    op.drop_table("runs")
