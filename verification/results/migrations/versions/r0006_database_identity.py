"""Add databases.identity and database_reports.identity: which database a row is, across sources.

A database is its source, its name there and the identifier its backups record (pgBackRest's
db-system-id, SQL Server's FamilyGUID): model.DatabaseIdentity, whose key (a SHA-256 of the three)
these columns hold. Baselines, history, drift, calibration and the rotation order are looked up by
it, so a stanza of one name in two repositories, or a name a new cluster took over, no longer shares
one database's baselines and history.

Rows recorded before this revision keep NULL: nothing recorded says which cluster they were of.
They are matched by their run's source and their name (verification.results.identity.Match.NAME),
and every report using one says so.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("databases", "database_reports"):
        op.add_column(table, sa.Column("identity", sa.String(length=64), nullable=True))
        op.create_index(op.f(f"ix_{table}_identity"), table, ["identity"], unique=False)


def downgrade() -> None:
    for table in ("database_reports", "databases"):
        op.drop_index(op.f(f"ix_{table}_identity"), table_name=table)
        # SQLite (3.35 and later) drops it in place, leaving the table's definition as 0005 made it.
        op.drop_column(table, "identity")
