"""one latency definition: a latency stored as its engine printed it (ddsperf's and Perftest's
half a round trip) becomes the round trip, in the typed value and in the row it came from

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_results = sa.table("results", sa.column("id", sa.Integer), sa.column("engine", sa.String),
                    sa.column("metric", sa.String), sa.column("value", sa.Float),
                    sa.column("row", sa.JSON))
BATCH = 1000


def upgrade() -> None:
    from k8sdds.results.upgrade import upgrade_row

    conn = op.get_bind()
    query = (sa.select(_results.c.id, _results.c.row)
             .where(_results.c.metric.like("latency_us%")).order_by(_results.c.id))
    last = 0
    while True:
        got = conn.execute(query.where(_results.c.id > last).limit(BATCH)).all()
        if not got:
            break
        for row in got:
            new = upgrade_row(dict(row.row))
            if new != row.row:
                conn.execute(_results.update().where(_results.c.id == row.id)
                             .values(row=new, value=float(new["value"])))
        last = got[-1].id


def downgrade() -> None:
    raise NotImplementedError("a round trip is not halved back into what an engine printed")
