"""A Redis lock store: atomic, two round trips a message, and it keeps the bot answering while Redis is down.

Rasa's ``RedisLockStore`` reads a conversation's lock, adds a ticket and
writes it back in separate commands, so two servers taking a ticket at the
same moment can both think they hold the lock; it also costs seven round
trips to Redis per message and keys Redis by the raw conversation id. Here
a ticket is taken, and the lock checked, in one Lua script that Redis runs
atomically, and released in another: the same first-come first-served
ticket lock with expiring tickets, two round trips, and keys made from a
keyed hash of the conversation id (as in the tracker store), so Redis holds
no sender id either.

A ticket lifetime (``TICKET_LOCK_LIFETIME``) is there for a server that died
holding a lock. Rasa counts it from when the ticket was taken, so a message
waiting behind a dead server's ticket, taken a moment later with the same
lifetime, could run out before it got the lock, and the turn failed. Here
each check renews the waiting ticket, and the holder's lifetime counts from
when it got the lock.

Rasa's ``RedisLockStore`` also raises on every message when Redis cannot be
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

import asyncio
import logging
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncGenerator, Optional, Text, Tuple

from redis.exceptions import RedisError

from rasa.core.lock import TicketLock
from rasa.core.lock_store import LOCK_LIFETIME, InMemoryLockStore, LockError, RedisLockStore
from rasa.utils.endpoints import EndpointConfig

logger = logging.getLogger(__name__)

#: What "Redis cannot be used" looks like: any client error, or a socket error.
REDIS_ERRORS = (RedisError, OSError)

#: Takes a ticket (ARGV[2] empty) or checks one: returns {ticket, lowest live ticket},
#: lowest -1 if the ticket itself expired. Expired tickets are dropped on the way.
#: A ticket that is checked and still alive gets its whole lifetime again: the
#: server waiting with it is alive, and only a dead server's ticket may run out.
#: The hash holds "next" (the ticket counter) and "t<n>" -> expiry in ms.
_ACQUIRE = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local lifetime = tonumber(ARGV[1])
local ticket = tonumber(ARGV[2])
if not ticket then
  ticket = redis.call('HINCRBY', KEYS[1], 'next', 1)
  redis.call('HSET', KEYS[1], 't' .. ticket, now + lifetime)
end
local fields = redis.call('HGETALL', KEYS[1])
local lowest = nil
local alive = false
for i = 1, #fields, 2 do
  local name = fields[i]
  if string.sub(name, 1, 1) == 't' then
    local number = tonumber(string.sub(name, 2))
    if tonumber(fields[i + 1]) <= now then
      redis.call('HDEL', KEYS[1], name)
    else
      if number == ticket then alive = true end
      if lowest == nil or number < lowest then lowest = number end
    end
  end
end
if not alive then return {ticket, -1} end
redis.call('HSET', KEYS[1], 't' .. ticket, now + lifetime)
if redis.call('PTTL', KEYS[1]) < lifetime then redis.call('PEXPIRE', KEYS[1], lifetime) end
return {ticket, lowest}
"""

#: Gives a ticket back; the key goes when no ticket is left.
_RELEASE = """
redis.call('HDEL', KEYS[1], 't' .. ARGV[1])
for _, name in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(name, 1, 1) == 't' then return 1 end
end
redis.call('DEL', KEYS[1])
return 0
"""
#: First wait before checking a held lock again (doubles up to ``wait_time_in_seconds``).
FIRST_WAIT = 0.005
#: How many times a waiting server takes a new ticket when its own ran out.
RETAKES = 2


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
        self._acquire_script = self.red.register_script(_ACQUIRE)
        self._release_script = self.red.register_script(_RELEASE)
        from bot.keys import secret_key

        self._key = secret_key()
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
            key = self._redis_key(conversation_id)
            try:
                ticket = await self._take_ticket(key, conversation_id, lock_lifetime, wait_time_in_seconds)
                acquired = TicketLock(conversation_id)
            except REDIS_ERRORS as exc:
                self._failed(exc)
            if acquired is not None:
                self._succeeded()
                try:
                    yield acquired
                finally:
                    self._release(key, ticket)
                return
        async with self.local.lock(conversation_id, lock_lifetime, wait_time_in_seconds) as acquired_here:
            yield acquired_here

    def _redis_key(self, conversation_id: Text) -> str:
        from bot.storage.tracker_store import conversation_id as hashed

        return f"{self.key_prefix}tickets:{hashed(conversation_id, self._key)}"

    async def _take_ticket(self, key: str, conversation_id: Text, lifetime: float, wait: float) -> int:
        """A ticket, once every earlier ticket of the conversation is released (or expired).

        Each check renews the waiting ticket, and the checks come at least
        three times a lifetime, so it cannot run out while this server waits.
        If it ran out all the same (the event loop or Redis stalled for a
        whole lifetime), a new ticket is taken, at most ``RETAKES`` times.
        """
        lifetime_ms = max(1, int(lifetime * 1000))
        longest_pause = max(0.001, min(wait, lifetime / 3))
        ticket, lowest = self._run_acquire(key, lifetime_ms, "")
        pause = min(FIRST_WAIT, longest_pause)
        retakes = 0
        while lowest != ticket:
            if lowest == -1:
                if retakes == RETAKES:
                    raise LockError(f"Could not acquire lock for conversation_id '{conversation_id}'.")
                retakes += 1
                logger.warning("a conversation's lock ticket expired while it waited: taking a new one")
                ticket, lowest = self._run_acquire(key, lifetime_ms, "")
                continue
            await asyncio.sleep(pause)
            pause = min(pause * 2, longest_pause)
            ticket, lowest = self._run_acquire(key, lifetime_ms, str(ticket))
        return ticket

    def _run_acquire(self, key: str, lifetime_ms: int, ticket: str) -> Tuple[int, int]:
        ticket_number, lowest = self._acquire_script(keys=[key], args=[lifetime_ms, ticket])
        return int(ticket_number), int(lowest)

    def _release(self, key: str, ticket: int) -> None:
        """Gives the ticket back; if Redis went away meanwhile, the ticket expires there by itself."""
        try:
            self._release_script(keys=[key], args=[ticket])
        except REDIS_ERRORS as exc:
            self._failed(exc)
