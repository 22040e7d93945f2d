"""200 conversations at once for 60 s against one server: no error, bounded latency, bounded memory.

The load comes from ``bot.bench.loadgen`` in its own process (its work is not
counted in the server's), in steady mode: each visitor holds conversations of
10 realistic messages and waits between its messages as a person reading the
reply and typing the next one would (5-10 s: about 27 messages a second for
the server, well within what one process answers on two cores, ~45/s in
``make bench``). Settings (environment): BOT_LOAD_VISITORS (200),
BOT_LOAD_SECONDS (60), BOT_LOAD_THINK ("5-10", seconds between messages).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from bot import paths
from bot.bench.runner import rss_mb
from tests.conftest import Chat, customs, running_bot

pytestmark = pytest.mark.slow

VISITORS = int(os.environ.get("BOT_LOAD_VISITORS", "200"))
SECONDS = float(os.environ.get("BOT_LOAD_SECONDS", "60"))
P99_BOUND_MS = 5000
RSS_GROWTH_BOUND_MB = 150
#: Every simulated visitor comes from this one address: the per-address rate
#: limit (bot.channels.limits) would refuse them. The per-conversation limit stays.
LOAD_ENV = {"BOT_RATE_PER_IP": "off"}


def think_range(default: str = "5-10", variable: str = "BOT_LOAD_THINK") -> Tuple[float, float]:
    low, _, high = os.environ.get(variable, default).partition("-")
    return float(low), float(high or low)


@pytest.fixture(scope="module")
def load_bot(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """A Rasa server of its own (SQLite tracker store, in-memory lock store) and an action server."""
    with running_bot(model_path, tmp_path_factory.mktemp("load"), name="rasa-load", env=LOAD_ENV) as bot:
        yield bot


def server_rss_mb(service: Any) -> float:
    """Resident memory of the server process and its children (Sanic workers), MB."""
    return round(sum(rss_mb(service.process.pid)), 1)


def loadgen(url: str, visitors: int, seconds: float, mode: str = "steady", think: Tuple[float, float] = (5, 10),
            seed: int = 7, extra: List[str] = ()) -> Dict[str, Any]:
    """Runs ``python -m bot.bench.loadgen`` and returns its figures."""
    command = [sys.executable, "-m", "bot.bench.loadgen", "--url", url, "--mode", mode,
               "--visitors", str(visitors), "--duration", str(seconds), "--seed", str(seed),
               "--think-min", str(think[0]), "--think-max", str(think[1]), *extra]
    result = subprocess.run(command, cwd=str(paths.project_dir()), capture_output=True, text=True,
                            timeout=seconds + 180)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_200_conversations_for_60_seconds(load_bot: Dict[str, Any]) -> None:
    url, rasa = load_bot["url"], load_bot["rasa"]
    # Warm-up: every lazily loaded part (sentence encoder, pools) is in memory before the first figure.
    assert customs(Chat(url).say("why do i miss him"), "answer")
    warm = loadgen(url, 20, 10, mode="burst", seed=1)
    assert warm["errors"] == 0, warm
    rss_before = server_rss_mb(rasa)

    think = think_range()
    figures = loadgen(url, VISITORS, SECONDS, think=think, seed=2)
    rss_after = server_rss_mb(rasa)

    print(f"\n{VISITORS} visitors for {SECONDS:.0f} s, {think[0]:g}-{think[1]:g} s between messages: "
          f"{figures['messages']} messages ({figures['per_second']}/s), {figures['errors']} errors "
          f"{figures['error_kinds'] or ''}, p50 {figures['p50_ms']} ms, p95 {figures['p95_ms']} ms, "
          f"p99 {figures['p99_ms']} ms, max {figures['max_ms']} ms; "
          f"server RSS {rss_before} MB before, {rss_after} MB after ({rss_after - rss_before:+.1f} MB)")
    assert figures["errors"] == 0, figures["error_kinds"]
    # Every visitor got through at least most of a conversation.
    assert figures["messages"] >= VISITORS * 4, figures
    assert figures["p99_ms"] < P99_BOUND_MS, figures
    assert rss_after - rss_before < RSS_GROWTH_BOUND_MB
    # The server still answers normally afterwards.
    assert customs(Chat(url).say("what is a trauma bond"), "answer")
