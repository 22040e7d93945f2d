"""A model swap (``bot promote``'s ``PUT /model``) on a live server: visitors are answered meanwhile.

Rasa loaded the new model inside the event loop, so for the whole load
(10 s and more) nobody was answered, a visitor in danger included. The
server here gets a model swap while visitors keep writing: messages must be
answered during the load, and the new model must be frozen out of the
garbage collector's way afterwards, as the first one was.
"""
from __future__ import annotations

import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import requests

from bot import promote
from tests.conftest import customs, running_bot

pytestmark = pytest.mark.slow

MESSAGES = [("why do i miss him", "answer"), ("he has a gun", "crisis_handoff"), ("what is a trauma bond", "answer")]


@pytest.fixture(scope="module")
def server(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    with running_bot(model_path, tmp_path_factory.mktemp("swap"), name="rasa-swap") as bot:
        yield bot


def keep_writing(url: str, stop: threading.Event, answered: List[Tuple[float, float, bool]]) -> None:
    """One visitor after another, each message as soon as the last was answered: (sent, seconds, right)."""
    n = 0
    while not stop.is_set():
        text, kind = MESSAGES[n % len(MESSAGES)]
        sender = f"swap-{uuid.uuid4().hex[:10]}"
        sent = time.monotonic()
        reply = requests.post(f"{url}/webhooks/rest/webhook", json={"sender": sender, "message": text}, timeout=60).json()
        answered.append((sent, time.monotonic() - sent, bool(customs(reply, kind))))
        n += 1


def test_visitors_are_answered_while_a_new_model_loads(server: Dict[str, Any], model_path: Path) -> None:
    answered: List[Tuple[float, float, bool]] = []
    stop = threading.Event()
    writer = threading.Thread(target=keep_writing, args=(server["url"], stop, answered), daemon=True)
    writer.start()
    time.sleep(1.0)
    started = time.monotonic()
    [result] = promote.hot_swap(model_path, urls=[server["url"]])
    swap_seconds = time.monotonic() - started
    time.sleep(1.0)
    stop.set()
    writer.join(60)

    assert result.ok, result.detail
    assert swap_seconds > 1.5, f"the swap took {swap_seconds:.1f} s: too short to tell"
    during = [(sent, took) for sent, took, _ in answered if started <= sent and sent + took <= started + swap_seconds]
    assert all(right for _, _, right in answered), [a for a in answered if not a[2]][:3]
    # Answered while the model loaded: many messages, none kept waiting for the load.
    assert len(during) >= 10, f"{len(during)} messages answered during a {swap_seconds:.1f} s swap"
    slowest = max(took for _, took, _ in answered)
    assert slowest < min(3.0, swap_seconds / 2), f"a message waited {slowest:.1f} s (swap {swap_seconds:.1f} s)"
    print(f"\nswap {swap_seconds:.1f} s: {len(during)} messages answered meanwhile, the slowest in {slowest * 1000:.0f} ms")


def test_the_new_model_is_kept_out_of_garbage_collection(server: Dict[str, Any]) -> None:
    deadline = time.monotonic() + 30
    found: List[str] = []
    while time.monotonic() < deadline and not found:
        log = server["rasa"].log_path.read_text(encoding="utf-8", errors="replace")
        found = re.findall(r"kept (\d+) objects of the loaded model out of garbage collection \(\d+ ms, after a model swap\)", log)
        time.sleep(0.5)
    assert found and int(found[-1]) > 100_000, server["rasa"].log_tail()
