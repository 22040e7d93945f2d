"""A real PostgreSQL server for the tests (see bot.local_services)."""
from bot.local_services import PostgresServer  # noqa: F401
