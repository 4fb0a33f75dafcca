"""runs and their results

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("started", sa.DateTime(timezone=True), nullable=True),
        sa.Column("backend", sa.String(32), nullable=False),
        sa.Column("engine", sa.String(32), nullable=False),
        sa.Column("datapaths", sa.String(512), nullable=False),
        sa.Column("transports", sa.String(128), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("imported", sa.DateTime(timezone=True), nullable=False),
        sa.Column("n_values", sa.Integer, nullable=False),
        sa.Column("manifest", sa.JSON, nullable=False),
    )
    op.create_index("ix_runs_started", "runs", ["started"])
    op.create_table(
        "run_tests",
        sa.Column("run_id", sa.String(64),
                  sa.ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False),
        sa.Column("datapath", sa.String(64), nullable=False),
        sa.Column("engine", sa.String(32), nullable=False),
        sa.Column("transport", sa.String(32), nullable=False),
        sa.Column("data_len", sa.Integer, nullable=False),
    )
    for column in ("run_id", "datapath", "data_len"):
        op.create_index(f"ix_run_tests_{column}", "run_tests", [column])
    op.create_table(
        "results",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64),
                  sa.ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False),
        sa.Column("test", sa.Integer, nullable=False),
        sa.Column("repeat", sa.Integer, nullable=False),
        sa.Column("datapath", sa.String(64), nullable=False),
        sa.Column("engine", sa.String(32), nullable=False),
        sa.Column("transport", sa.String(32), nullable=False),
        sa.Column("data_len", sa.Integer, nullable=False),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("metric", sa.String(64), nullable=False),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("unit", sa.String(16), nullable=False),
        sa.Column("row", sa.JSON, nullable=False),
    )
    for column in ("run_id", "datapath", "data_len", "metric"):
        op.create_index(f"ix_results_{column}", "results", [column])


def downgrade() -> None:
    op.drop_table("results")
    op.drop_table("run_tests")
    op.drop_table("runs")
