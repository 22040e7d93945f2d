"""Alembic environment: runs migrations on the engine given by bot.storage.db."""
from __future__ import annotations

from alembic import context

from bot.storage.schema import metadata

config = context.config
engine = config.attributes.get("engine")
if engine is None:  # run from the alembic command line
    from bot.storage.db import engine as make_engine

    engine = make_engine()

with engine.begin() as connection:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
