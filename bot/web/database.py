"""One database connection per request (closed on teardown), and the audit log."""
from __future__ import annotations

import time
from typing import Optional

import sqlalchemy as sa
from flask import Flask, g

from bot.storage import db
from bot.storage.schema import audit_log

_migrated = False


def connection() -> sa.engine.Connection:
    global _migrated
    if "db" not in g:
        if not _migrated:
            db.migrate()
            _migrated = True
        g.db = db.engine().connect()
    return g.db


def close(_error: Optional[BaseException] = None) -> None:
    conn = g.pop("db", None)
    if conn is not None:
        conn.close()


def audit(action: str, conversation_id: Optional[str] = None, detail: Optional[str] = None) -> None:
    """Writes an audit row (who did what, when), committed at once."""
    user = g.get("user")
    with db.engine().begin() as conn:
        conn.execute(
            sa.insert(audit_log).values(
                at=time.time(),
                user_name=user.name if user else "-",
                action=action,
                conversation_id=conversation_id,
                detail=detail,
            )
        )


def init_app(app: Flask) -> None:
    app.teardown_appcontext(close)
