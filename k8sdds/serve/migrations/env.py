"""Alembic's environment for `k8sdds serve`: the connection comes from the caller
(k8sdds.serve.store.migrate), never from a file."""

from alembic import context

from k8sdds.serve.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
