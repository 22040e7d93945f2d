"""A new model goes live (``PUT /model``) while the server keeps answering.

Rasa loads the model of ``PUT /model`` inside the event loop: loading is
seconds of plain Python work with no ``await`` in it, so for as long as it
takes (10-12 s here) the server answered nobody, a visitor in danger
included, although ``bot promote`` swaps models on live servers. Here the
loading runs in a worker thread with its own event loop; the server goes
on answering with the old model (more slowly: the two share the GIL) until
Rasa puts the new one in its place.

Once the new model serves, the memory it replaced is collected and the new
model frozen out of the garbage collector's way (``bot.memory``), as after
the first load: otherwise the old model's reference cycles stayed frozen
for good and every full collection walked the new model again.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any, Optional

logger = logging.getLogger(__name__)

#: Seconds after a swap before the old model is collected (messages still using it finish first).
REFREEZE_AFTER = 2.0

_installed = False


def _served_agent() -> Optional[Any]:
    from sanic import Sanic

    try:
        return Sanic.get_app("rasa_server").ctx.agent
    except Exception:  # noqa: BLE001  (Sanic raises its own error when there is no Rasa app here)
        return None


def refreeze_if_served(agent: Any) -> bool:
    """Collects what the swap left behind and freezes the rest, if ``agent`` is the one serving.

    ``PUT /model`` loads models to serve; ``/model/test/intents`` loads one to
    evaluate and drops it, which must not be frozen (it would never be freed).
    """
    if _served_agent() is not agent:
        return False
    from bot.memory import freeze_loaded_objects

    started = time.perf_counter()
    gc.unfreeze()  # the old model back in reach of the collector
    count = freeze_loaded_objects()
    logger.info("kept %d objects of the loaded model out of garbage collection (%.0f ms, after a model swap)",
                count, (time.perf_counter() - started) * 1000)
    return True


def install() -> None:
    """Wraps ``rasa.server._load_agent`` (used by ``PUT /model``) once per process."""
    global _installed
    if _installed:
        return
    import rasa.server

    original = rasa.server._load_agent

    async def load_agent_off_the_loop(
        model_path: Optional[str] = None,
        model_server: Any = None,
        remote_storage: Optional[str] = None,
        endpoints: Any = None,
    ) -> Any:
        kwargs = dict(model_path=model_path, model_server=model_server, remote_storage=remote_storage, endpoints=endpoints)
        loop = asyncio.get_running_loop()
        if model_server is not None or remote_storage is not None or getattr(endpoints, "event_broker", None):
            # A model server's client and an event broker belong to the server's own loop.
            agent = await original(**kwargs)
        else:
            agent = await loop.run_in_executor(None, lambda: asyncio.run(original(**kwargs)))
        loop.call_later(REFREEZE_AFTER, refreeze_if_served, agent)
        return agent

    rasa.server._load_agent = load_agent_off_the_loop
    _installed = True
