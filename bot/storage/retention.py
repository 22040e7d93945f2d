"""Retention: conversations older than a set period (default 30 days) are deleted.

``python -m bot purge`` does it on demand; a running server does it once a
day in a background thread.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Optional

import sqlalchemy as sa

from bot.storage import db
from bot.storage.schema import conversations, events

logger = logging.getLogger(__name__)
DEFAULT_RETENTION_DAYS = 30.0
_started = False


def configured_days(explicit: Optional[float] = None) -> float:
    if explicit is not None:
        return float(explicit)
    return float(os.environ.get("BOT_RETENTION_DAYS", DEFAULT_RETENTION_DAYS))


def purge(days: Optional[float] = None, url: Optional[str] = None, now: Optional[float] = None) -> int:
    """Deletes conversations whose last activity is older than ``days``; returns how many."""
    days = configured_days(days)
    cutoff = (now if now is not None else time.time()) - days * 86400
    with db.engine(url).begin() as connection:
        old = sa.select(conversations.c.id).where(conversations.c.last_active < cutoff)
        connection.execute(sa.delete(events).where(events.c.conversation_id.in_(old)))
        deleted = connection.execute(sa.delete(conversations).where(conversations.c.last_active < cutoff)).rowcount
    return deleted or 0


def start_daily_purge(store: Any, interval_hours: float = 24.0) -> None:
    """Purges in a daemon thread now and then every ``interval_hours`` (once per process)."""
    global _started
    if _started or interval_hours <= 0:
        return
    _started = True

    def loop() -> None:
        while True:
            try:
                if store._ensure_ready():
                    count = purge(store.retention_days, store.url)
                    if count:
                        logger.info("retention: deleted %d conversation(s) older than %s days", count, store.retention_days)
            except Exception as exc:  # noqa: BLE001  (a failed purge is retried next time)
                logger.error("retention purge failed (%s)", type(exc).__name__)
            time.sleep(interval_hours * 3600)

    threading.Thread(target=loop, name="retention-purge", daemon=True).start()
