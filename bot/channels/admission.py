"""A queue in front of the bot: a few messages are worked on at once, in arrival order; danger goes first.

When a post is shared at night, messages arrive faster than one process can
answer them. Rasa starts working on every one of them at once, and a message
that has to wait for something midway (the action server, for instance) goes
to the back of a queue as long as the crowd, again at every wait: under such
a burst some visitors waited seconds while others were answered at once.
Here at most ``BOT_CONCURRENT_MESSAGES`` (default 8; ``0`` for no limit)
messages are worked on at a time, the others wait their turn in the order
they came, and nobody is overtaken more than once.

Except a message that signals danger: when there is a queue, the danger
rules read it first (half a millisecond; the NLU pipeline then reuses the
answer) and it skips the queue, straight to the crisis handoff.
"""
from __future__ import annotations

import asyncio
import os
from contextlib import asynccontextmanager
from typing import AsyncIterator, Optional

DEFAULT_CONCURRENT = 8


def configured_limit(raw: Optional[str] = None) -> int:
    """``BOT_CONCURRENT_MESSAGES``; a bad value stops the server at start-up."""
    raw = os.environ.get("BOT_CONCURRENT_MESSAGES", "") if raw is None else raw
    if not raw.strip():
        return DEFAULT_CONCURRENT
    try:
        limit = int(raw)
    except ValueError:
        raise ValueError(f"BOT_CONCURRENT_MESSAGES must be a whole number (0 for no limit), not {raw!r}") from None
    if limit < 0:
        raise ValueError("BOT_CONCURRENT_MESSAGES must not be negative")
    return limit


class Admission:
    """Lets at most ``limit`` messages into the bot at once (0: all of them)."""

    def __init__(self, limit: int = DEFAULT_CONCURRENT) -> None:
        self.limit = limit
        self._slots = asyncio.Semaphore(limit) if limit > 0 else None
        self.skipped = 0  # messages that signalled danger and went ahead of a queue

    @classmethod
    def from_env(cls) -> "Admission":
        return cls(configured_limit())

    @property
    def busy(self) -> bool:
        return self._slots is not None and self._slots.locked()

    @asynccontextmanager
    async def turn(self, text: str) -> AsyncIterator[None]:
        """Waits for a free slot, unless the message signals danger and there is a queue."""
        if self._slots is None:
            yield
            return
        if self._slots.locked():
            from bot.danger import load_detector

            if load_detector().detect(text) is not None:
                self.skipped += 1
                yield
                return
        async with self._slots:
            yield


_SHARED: Optional[Admission] = None


def shared_admission() -> Admission:
    """One queue per process, shared by the REST and socket.io channels."""
    global _SHARED
    if _SHARED is None:
        _SHARED = Admission.from_env()
    return _SHARED
