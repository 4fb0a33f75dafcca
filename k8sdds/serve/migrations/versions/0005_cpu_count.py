"""one name for a CPU count: a stored manifest of schema version 2 (its node fingerprints
named the count `cpus`) upgraded as a run directory's is when read (results.manifest)

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_runs = sa.table("runs", sa.column("run_id", sa.String), sa.column("manifest", sa.JSON))


def upgrade() -> None:
    from k8sdds.results.manifest import SCHEMA_VERSION, ManifestError
    from k8sdds.results.manifest import upgrade as current

    conn = op.get_bind()
    for row in conn.execute(sa.select(_runs.c.run_id, _runs.c.manifest)).all():
        manifest = row.manifest
        if not isinstance(manifest, dict) or manifest.get("schema_version") == SCHEMA_VERSION:
            continue
        try:
            new = current(dict(manifest))
        except ManifestError:
            continue  # not a manifest k8sdds wrote: left as it was
        conn.execute(_runs.update().where(_runs.c.run_id == row.run_id).values(manifest=new))


def downgrade() -> None:
    raise NotImplementedError("a manifest is not written back at an older version")
