"""Add runs.report_folder and the indexes that page the run listings.

index.html pages one report folder's runs, newest first, and the Airflow page pages every run: with
10,000 runs neither may read them all. report_folder is the folder a run's report folder sits in
(where index.html is), kept as an absolute path so one exact, indexed comparison finds a folder's
runs; (report_folder, started_at, run_id) and (started_at, run_id) are the orders the listings use.

Rows recorded before this revision get the parent of their report_dir. A relative report_dir (the
default report_dir is "reports") is made absolute against the folder the upgrading process runs in:
the one the run's own processes used when they wrote it there, as far as anything recorded tells.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def report_folder(report_dir: str) -> str:
    return os.path.dirname(os.path.abspath(report_dir))


def upgrade() -> None:
    op.add_column("runs", sa.Column("report_folder", sa.Text(), nullable=True))
    runs = sa.table("runs", sa.column("id", sa.Integer()), sa.column("report_dir", sa.Text()),
                    sa.column("report_folder", sa.Text()))
    connection = op.get_bind()
    found = connection.execute(sa.select(runs.c.id, runs.c.report_dir).where(runs.c.report_dir.is_not(None))).all()
    if found:
        connection.execute(sa.update(runs).where(runs.c.id == sa.bindparam("row_id"))
                           .values(report_folder=sa.bindparam("folder")),
                           [{"row_id": row_id, "folder": report_folder(path)} for row_id, path in found])
    op.create_index("ix_runs_report_folder_started", "runs", ["report_folder", "started_at", "run_id"])
    op.create_index("ix_runs_started", "runs", ["started_at", "run_id"])


def downgrade() -> None:
    op.drop_index("ix_runs_started", table_name="runs")
    op.drop_index("ix_runs_report_folder_started", table_name="runs")
    # SQLite (3.35 and later) drops it in place, leaving the table's definition as 0003 made it.
    op.drop_column("runs", "report_folder")
