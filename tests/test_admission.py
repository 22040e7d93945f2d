"""The queue in front of the bot: a few at a time, in arrival order, danger first."""
from __future__ import annotations

import asyncio
import time
from typing import List

import pytest

from bot.channels.admission import Admission, configured_limit


def test_at_most_the_limit_run_at_once_and_in_arrival_order() -> None:
    admission = Admission(2)
    running: List[int] = []
    most = 0
    started: List[int] = []

    async def message(n: int) -> None:
        nonlocal most
        await asyncio.sleep(n * 0.001)  # arrive in order
        async with admission.turn("why do i miss him"):
            started.append(n)
            running.append(n)
            most = max(most, len(running))
            await asyncio.sleep(0.01)
            running.remove(n)

    async def main() -> None:
        await asyncio.gather(*(message(n) for n in range(10)))

    asyncio.run(main())
    assert most == 2
    assert started == list(range(10))


def test_a_message_that_signals_danger_skips_the_queue() -> None:
    admission = Admission(1)
    finished: List[str] = []

    async def message(text: str, delay: float) -> float:
        await asyncio.sleep(delay)
        arrived = time.monotonic()
        async with admission.turn(text):
            waited = time.monotonic() - arrived
            await asyncio.sleep(0.02)
        finished.append(text)
        return waited

    async def main() -> List[float]:
        calm = [message(f"why do i miss him ({i})", 0) for i in range(8)]
        return await asyncio.gather(*calm, message("he has a gun and he is here", 0.005))

    waits = asyncio.run(main())
    assert waits[-1] < 0.01, f"the handoff waited {waits[-1]:.3f} s behind the queue"
    assert max(waits[:-1]) > 0.1  # the others did queue
    assert finished.index("he has a gun and he is here") < 3
    assert admission.skipped == 1


def test_no_queue_without_a_limit_and_bad_settings_stop_the_server() -> None:
    assert not Admission(0).busy
    assert configured_limit("") == 8 and configured_limit("0") == 0 and configured_limit("8") == 8
    for bad in ("many", "-1", "2.5"):
        with pytest.raises(ValueError):
            configured_limit(bad)
