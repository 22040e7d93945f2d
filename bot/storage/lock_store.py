"""A Redis lock store that keeps the bot answering while Redis is down.

Rasa's ``RedisLockStore`` raises on every message when Redis cannot be
reached: no message is processed at all (the channels then send only their
last-resort reply). This one falls back to a lock in this process, logs it
once, tries Redis again after a short wait (doubling up to a limit while it
stays down) and goes back to Redis by itself when Redis answers again.

While Redis is down, two messages of one conversation that reach two
different servers are no longer ordered with each other; messages reaching
the same server still are. Answering, and above all handing off a visitor in
danger, matters more than that ordering.

Configured in the endpoints file like Rasa's own (``url`` is the host name)::

    lock_store:
      type: bot.storage.lock_store.ResilientRedisLockStore
      url: redis
      port: 6379
      retry_seconds: 1        # first wait before Redis is tried again (default 1)
      max_retry_seconds: 30   # longest wait while it stays down (default 30)
      connect_timeout: 1      # seconds to open a connection (default 1)
"""
from __future__ import annotations

import logging
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncGenerator, Optional, Text

from redis.exceptions import RedisError

from rasa.core.lock import TicketLock
from rasa.core.lock_store import LOCK_LIFETIME, InMemoryLockStore, LockError, RedisLockStore
from rasa.utils.endpoints import EndpointConfig

logger = logging.getLogger(__name__)

#: What "Redis cannot be used" looks like: any client error, or a socket error.
REDIS_ERRORS = (RedisError, OSError)


def _redis_failure(exc: BaseException) -> Optional[BaseException]:
    """The Redis error behind ``exc`` (``issue_ticket`` wraps it in a ``LockError``), if any."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, REDIS_ERRORS):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


class ResilientRedisLockStore(RedisLockStore):
    """``RedisLockStore`` with an in-process fallback while Redis cannot be reached."""

    def __init__(self, endpoint_config: Optional[EndpointConfig] = None, **kwargs: Any) -> None:
        options = dict(endpoint_config.kwargs) if endpoint_config is not None else {}
        options.update(kwargs)
        host = options.pop("host", None) or (endpoint_config.url if endpoint_config is not None else None) or "localhost"
        self.retry_seconds = float(options.pop("retry_seconds", 1.0))
        self.max_retry_seconds = max(self.retry_seconds, float(options.pop("max_retry_seconds", 30.0)))
        connect_timeout = float(options.pop("connect_timeout", 1.0))
        super().__init__(host=host, **options)
        # Opening a connection to an unreachable host must not hold up the
        # event loop for the whole socket timeout.
        self.red.connection_pool.connection_kwargs["socket_connect_timeout"] = connect_timeout
        self.local = InMemoryLockStore()
        self._down_since: Optional[float] = None
        self._next_try = 0.0
        self._wait = self.retry_seconds

    # ------------------------------------------------------------------ state

    @property
    def redis_down(self) -> bool:
        return self._down_since is not None

    def _redis_worth_trying(self) -> bool:
        return self._down_since is None or time.monotonic() >= self._next_try

    def _failed(self, exc: BaseException) -> None:
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
            self._wait = self.retry_seconds
            logger.error(
                "Redis lock store unreachable (%s: %s): locking conversations in this process until it is back",
                type(exc).__name__, exc,
            )
        else:
            self._wait = min(self._wait * 2, self.max_retry_seconds)
        self._next_try = now + self._wait

    def _succeeded(self) -> None:
        if self._down_since is not None:
            logger.warning(
                "Redis lock store is back after %.0f s: conversations are locked in Redis again",
                time.monotonic() - self._down_since,
            )
            self._down_since = None
            self._wait = self.retry_seconds

    # ------------------------------------------------------------------ locking

    @asynccontextmanager
    async def lock(
        self,
        conversation_id: Text,
        lock_lifetime: float = LOCK_LIFETIME,
        wait_time_in_seconds: float = 1,
    ) -> AsyncGenerator[TicketLock, None]:
        """The conversation's lock in Redis, or in this process while Redis is down.

        A conversation that holds a lock in this process keeps using it until
        that lock is released, so its messages stay in order when Redis comes
        back in the middle.
        """
        if self.local.get_lock(conversation_id) is None and self._redis_worth_trying():
            acquired: Optional[TicketLock] = None
            try:
                ticket = self.issue_ticket(conversation_id, lock_lifetime)
                acquired = await self._acquire_lock(conversation_id, ticket, wait_time_in_seconds)
            except LockError as exc:  # issue_ticket wraps any error in a LockError
                cause = _redis_failure(exc)
                if cause is None:
                    raise  # a real lock error (the lock expired while waiting)
                self._failed(cause)
            except REDIS_ERRORS as exc:  # Redis went away while waiting for the lock
                self._failed(exc)
            if acquired is not None:
                self._succeeded()
                try:
                    yield acquired
                finally:
                    self._release(conversation_id, ticket)
                return
        async with self.local.lock(conversation_id, lock_lifetime, wait_time_in_seconds) as acquired_here:
            yield acquired_here

    def _release(self, conversation_id: Text, ticket: int) -> None:
        """Frees the ticket in Redis; if Redis went away meanwhile, the ticket expires there by itself."""
        try:
            self.cleanup(conversation_id, ticket)
        except REDIS_ERRORS as exc:
            self._failed(exc)
