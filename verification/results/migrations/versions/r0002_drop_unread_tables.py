"""Drop chains, phases and checks: written by every run, read by nothing.

Every reader (reports, calibration, drift, the Airflow page) takes a database's chain, phases and
checks from its report entry, kept whole as JSON in database_reports; these three tables only
repeated parts of it. The downgrade makes them again, empty: their rows are not kept anywhere else
as rows, and the report entries still hold the same facts.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

from __future__ import annotations

from verification.results.migrations.versions.r0001_baseline import create_detail_tables, drop_detail_tables

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    drop_detail_tables()


def downgrade() -> None:
    create_detail_tables()
