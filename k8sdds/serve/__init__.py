"""`k8sdds serve`: runs and their results in a database (SQLite by default, any SQLAlchemy
URL; PostgreSQL tested), schema changes through Alembic migrations, and an HTTP API."""
