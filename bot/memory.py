"""Memory of a Rasa server: freed memory given back, the loaded model kept out of the GC's way.

Loading a model builds large temporary tables (the Spanish lemma lookup is
read whole and then cut down to the words the danger rules use); glibc keeps
the freed pages in the process, where they count against the server's
memory. ``malloc_trim`` returns them. It takes a few milliseconds, so a
background thread calls it once a minute. On systems without glibc it does
nothing.

A loaded model is about 580 000 Python objects (vocabularies, lookup
tables, the domain) that live as long as the server. Python's cyclic
garbage collector walks all of them in each full collection: 260-300 ms
with the event loop stopped, a few times a minute under load, which was the
p99 of the benchmark's 150 visitors. ``freeze_after_model_load`` moves them
into the permanent generation (``gc.freeze``) once the model has loaded, so
full collections only walk what was made since. A model swapped in later
over the HTTP API (``bot promote``) is frozen the same way once it serves,
after the old one is collected (``bot.model_swap``).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import logging
import threading
import time
from typing import Any, Callable, Optional

logger = logging.getLogger(__name__)
_started = False
_freeze_installed = False


def release_free_memory() -> bool:
    """True when glibc's ``malloc_trim`` could be called."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        return False
    return True


def start_trimming(first_after: float = 20.0, every: float = 60.0, rounds: Optional[int] = None) -> None:
    """A daemon thread that trims after start-up and then every ``every`` seconds (once per process)."""
    global _started
    if _started:
        return
    _started = True

    def loop() -> None:
        time.sleep(first_after)
        done = 0
        while rounds is None or done < rounds:
            if not release_free_memory():
                return
            done += 1
            time.sleep(every)

    threading.Thread(target=loop, name="malloc-trim", daemon=True).start()


def freeze_loaded_objects() -> int:
    """Collects the garbage of loading, then freezes every object left; returns how many are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def frozen_after(load: Callable[..., Any]) -> Callable[..., Any]:
    """``load`` (a coroutine function), then ``freeze_loaded_objects``."""

    @functools.wraps(load)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = await load(*args, **kwargs)
        started = time.perf_counter()
        count = freeze_loaded_objects()
        logger.info("kept %d objects of the loaded model out of garbage collection (%.0f ms)",
                    count, (time.perf_counter() - started) * 1000)
        return result

    return wrapper


def freeze_after_model_load() -> None:
    """Wraps the function ``rasa run`` loads its model with, once per process."""
    global _freeze_installed
    if _freeze_installed:
        return
    import rasa.core.run

    rasa.core.run.load_agent_on_start = frozen_after(rasa.core.run.load_agent_on_start)
    _freeze_installed = True
