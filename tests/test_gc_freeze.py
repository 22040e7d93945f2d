"""The loaded model is kept out of Python's full garbage collections (bot.memory)."""
from __future__ import annotations

import asyncio
import gc
import re
import time
from typing import Any, Dict, List

import pytest

from bot import memory


def test_objects_made_while_loading_are_frozen_and_later_ones_are_not() -> None:
    made: List[Any] = []

    async def load() -> str:
        made.extend([[i] for i in range(50_000)])  # a "model": long-lived objects (lists are tracked)
        return "agent"

    before = gc.get_freeze_count()
    try:
        assert asyncio.run(memory.frozen_after(load)()) == "agent"
        frozen = gc.get_freeze_count()
        assert frozen >= before + 50_000
        # A full collection now walks only what was made after the load.
        started = time.perf_counter()
        gc.collect(2)
        after_freeze = time.perf_counter() - started
        gc.unfreeze()
        started = time.perf_counter()
        gc.collect(2)
        unfrozen = time.perf_counter() - started
        assert after_freeze < unfrozen, (after_freeze, unfrozen)
    finally:
        gc.unfreeze()


@pytest.mark.slow
def test_the_rasa_server_froze_its_model_after_loading_it(bot_url: str, servers: Dict[str, Any]) -> None:
    log = servers["rasa"].log_path.read_text(encoding="utf-8", errors="replace")
    found = re.findall(r"kept (\d+) objects of the loaded model out of garbage collection", log)
    assert found and int(found[-1]) > 100_000, log[-2000:]
