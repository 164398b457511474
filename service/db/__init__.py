"""Persistence: typed SQLAlchemy 2 models, the engine, and repositories holding the queries."""
