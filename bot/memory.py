"""Gives memory that Python has freed back to the operating system, now and then.

Loading a model builds large temporary tables (the Spanish lemma lookup is
read whole and then cut down to the words the danger rules use); glibc keeps
the freed pages in the process, where they count against the server's
memory. ``malloc_trim`` returns them. It takes a few milliseconds, so a
background thread calls it once a minute. On systems without glibc it does
nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from typing import Optional

_started = False


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
