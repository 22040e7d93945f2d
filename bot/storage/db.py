"""The database: one engine per process, created from BOT_DB_URL, migrated on first use.

SQLite (a file under var/, created on first run) needs nothing installed;
PostgreSQL is one setting away: ``BOT_DB_URL=postgresql://user:pw@host/db``.
"""
from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Dict, Optional

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from bot import paths

logger = logging.getLogger(__name__)
MIGRATIONS = Path(__file__).parent / "migrations"
_engines: Dict[str, Engine] = {}
_lock = threading.Lock()


def database_url() -> str:
    """BOT_DB_URL, or the SQLite file var/bot.db."""
    url = os.environ.get("BOT_DB_URL", "").strip()
    if url:
        if url.startswith("postgres://"):
            url = "postgresql://" + url[len("postgres://") :]
        return url
    path = paths.var_dir() / "bot.db"
    return f"sqlite:///{path}"


def describe(url: str) -> str:
    """The URL without its password, for logs and messages."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL is reported as such
        return "<invalid database URL>"


def engine(url: Optional[str] = None) -> Engine:
    """The engine for ``url`` (default: ``database_url()``), created once per process."""
    url = url or database_url()
    with _lock:
        if url not in _engines:
            _engines[url] = _create(url)
        return _engines[url]


def _create(url: str) -> Engine:
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # A small pool of open connections: SQLAlchemy's default for a SQLite
        # file opens and closes one per query, which was a tenth of a message's time.
        created = sa.create_engine(
            url,
            future=True,
            poolclass=sa.pool.QueuePool,
            pool_size=4,
            max_overflow=4,
            connect_args={"timeout": 10, "check_same_thread": False},
        )

        @sa.event.listens_for(created, "connect")
        def _sqlite_pragmas(connection, _record) -> None:  # type: ignore[no-untyped-def]
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA secure_delete=ON")  # deleted conversations are overwritten on disk
            cursor.close()

        return created
    return sa.create_engine(
        url,
        future=True,
        # No ping before every checkout (a round trip each, twice a message): a
        # connection the database dropped fails once, SQLAlchemy then throws the
        # pool's connections away, the tracker store keeps that turn in memory,
        # and the next turn connects afresh.
        pool_pre_ping=False,
        pool_size=5,
        max_overflow=5,
        connect_args={"connect_timeout": 3} if parsed.get_backend_name() == "postgresql" else {},
    )


def migrate(url: Optional[str] = None) -> None:
    """Brings the schema up to date (Alembic ``upgrade head``)."""
    from alembic import command
    from alembic.config import Config

    url = url or database_url()
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its INFO lines say nothing useful in our logs
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine(url)
    command.upgrade(config, "head")
    logger.info("database schema is up to date (%s)", describe(url))
