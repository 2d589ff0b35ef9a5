"""Add run_plans: each database's restore plan, made once by a run's discovery.

A scheduled run's tasks run in separate processes (Airflow's workers); each verifies one database
from the plan its run's discovery recorded here, instead of reading and planning the whole source
again. The plan is kept whole as JSON (verification.model.RestorePlan, read back by pydantic).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_plans",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_pk", sa.Integer(), nullable=False),
        sa.Column("database", sa.String(length=256), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["run_pk"], ["runs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_run_plans_run_pk"), "run_plans", ["run_pk"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_run_plans_run_pk"), table_name="run_plans")
    op.drop_table("run_plans")
