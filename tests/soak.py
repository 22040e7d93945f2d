"""Soak: steady load on one server for 10 minutes; memory must stay flat, no message may fail.

Not collected by ``make test`` (the name does not start with ``test_``):
``make soak`` runs it (``pytest -q -p no:cacheprovider tests/soak.py``).

Load, from an asyncio client in this process: 100 visitors, each sending a
message, reading the reply and waiting 1-3 s before the next one (a closed
loop: never more than 100 messages in flight, so a slow moment of a shared
machine shows as latency, not as a pile of requests that time out). Their
messages are realistic (``bot.bench.loadgen``: a greeting, development-set
messages, a thank-you), and a visitor starts a new conversation (a new sender
id) after 10 messages or as soon as the run is behind its schedule of 10 000
distinct senders over 10 minutes (scaled to the run): many visitors ask one
or two things and leave.

The server's resident memory is sampled every 30 s after a warm-up (the
tracker store keeps the last 1000 conversations in memory: the warm-up fills
that cache, so what follows must be flat). Figures and samples go to
``var/soak.json``.

Settings (environment): BOT_SOAK_SECONDS (600, measured time after the
warm-up), BOT_SOAK_WARMUP_SECONDS (60), BOT_SOAK_VISITORS (100),
BOT_SOAK_THINK ("1-3"), BOT_SOAK_SENDERS (10 000 per 600 s of the whole run),
BOT_SOAK_SAMPLE_SECONDS (30).
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import aiohttp
import pytest

from bot import paths
from bot.bench.loadgen import Recorder, _pct, conversation, load_questions, send
from bot.bench.runner import rss_mb
from tests.conftest import Chat, customs, running_bot

SECONDS = float(os.environ.get("BOT_SOAK_SECONDS", "600"))
WARMUP = float(os.environ.get("BOT_SOAK_WARMUP_SECONDS", "60"))
VISITORS = int(os.environ.get("BOT_SOAK_VISITORS", "100"))
_low, _, _high = os.environ.get("BOT_SOAK_THINK", "1-3").partition("-")
THINK = (float(_low), float(_high or _low))
SENDERS = int(os.environ.get("BOT_SOAK_SENDERS", str(round(10_000 * (WARMUP + SECONDS) / 600))))
SAMPLE_EVERY = float(os.environ.get("BOT_SOAK_SAMPLE_SECONDS", "30"))
FLAT_BOUND_MB = 50.0  # last third's mean minus the first third's
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def soak_bot(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    # Every simulated visitor comes from this one address: no per-address limit.
    with running_bot(model_path, tmp_path_factory.mktemp("soak"), name="rasa-soak", env={"BOT_RATE_PER_IP": "off"}) as bot:
        yield bot


def server_rss_mb(pid: int) -> float:
    return round(sum(rss_mb(pid)), 1)


async def run_soak(url: str, pid: int) -> Dict[str, Any]:
    webhook = url.rstrip("/") + "/webhooks/rest/webhook"
    questions = load_questions()
    rec = Recorder()
    start = time.perf_counter()
    measure_from = start + WARMUP
    deadline = measure_from + SECONDS
    senders = set()
    samples: List[Dict[str, Any]] = []

    def behind_schedule() -> bool:
        elapsed = time.perf_counter() - start
        return len(senders) < SENDERS * elapsed / (deadline - start)

    async def visitor(n: int, session: aiohttp.ClientSession) -> None:
        rng = random.Random(n)
        await asyncio.sleep(rng.uniform(0, THINK[1]))  # arrivals spread over the first think time
        conv = 0
        while time.perf_counter() < deadline:
            sender = f"soak-{n}-{conv}"
            senders.add(sender)
            script = conversation(rng, questions)
            if rng.random() < 0.5:
                script = script[1:]  # straight to the question, no greeting
            for text in script:
                if time.perf_counter() >= deadline:
                    return
                await send(session, webhook, sender, text, rec, TIMEOUT)
                await asyncio.sleep(rng.uniform(*THINK))
                if behind_schedule():
                    break
            conv += 1

    async def sampler() -> None:
        await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
        seen = len(rec.latencies)
        while True:
            now = time.perf_counter()
            window = sorted(rec.latencies[seen:])
            seen = len(rec.latencies)
            samples.append({
                "t": round(now - measure_from, 1),
                "rss_mb": server_rss_mb(pid),
                "messages": len(rec.latencies),
                "errors": sum(rec.errors.values()),
                "senders": len(senders),
                "window_p50_ms": _pct(window, 50),
                "window_p99_ms": _pct(window, 99),
            })
            if now >= deadline:
                return
            await asyncio.sleep(max(0.0, min(SAMPLE_EVERY, deadline - time.perf_counter())))

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await asyncio.gather(sampler(), *(visitor(n, session) for n in range(VISITORS)))
    rec.finished = time.perf_counter()
    return {"summary": rec.summary(), "samples": samples, "senders": len(senders)}


def flatness(samples: List[Dict[str, Any]]) -> Dict[str, float]:
    """Last third's mean minus first third's mean, and the least-squares slope (MB per minute)."""
    values = [s["rss_mb"] for s in samples]
    times = [s["t"] for s in samples]
    k = max(1, len(values) // 3)
    growth = statistics.fmean(values[-k:]) - statistics.fmean(values[:k])
    slope = 0.0
    if len(values) >= 2 and max(times) > min(times):
        mean_t, mean_v = statistics.fmean(times), statistics.fmean(values)
        slope = sum((t - mean_t) * (v - mean_v) for t, v in zip(times, values)) / sum((t - mean_t) ** 2 for t in times)
    return {"growth_mb": round(growth, 1), "slope_mb_per_min": round(slope * 60, 2)}


def test_soak_memory_stays_flat_and_nothing_fails(soak_bot: Dict[str, Any]) -> None:
    url, rasa = soak_bot["url"], soak_bot["rasa"]
    assert customs(Chat(url).say("why do i miss him"), "answer")
    idle = server_rss_mb(rasa.process.pid)
    result = asyncio.run(run_soak(url, rasa.process.pid))
    samples, summary = result["samples"], result["summary"]
    flat = flatness(samples)
    report = {
        "settings": {"seconds": SECONDS, "warmup_seconds": WARMUP, "visitors": VISITORS, "think_seconds": THINK,
                     "senders_target": SENDERS, "sample_seconds": SAMPLE_EVERY},
        "idle_rss_mb": idle,
        "distinct_senders": result["senders"],
        **flat,
        "load": summary,
        "samples": samples,
    }
    out = paths.var_dir() / "soak.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"\nsoak: {WARMUP:.0f} s warm-up + {SECONDS:.0f} s, {VISITORS} visitors every {THINK[0]:g}-{THINK[1]:g} s "
          f"({SENDERS} senders wanted); {summary['messages']} messages ({summary['per_second']}/s) from "
          f"{result['senders']} senders, {summary['errors']} errors {summary['error_kinds'] or ''}; "
          f"p50 {summary['p50_ms']} ms, p95 {summary['p95_ms']} ms, p99 {summary['p99_ms']} ms; RSS idle {idle} MB, "
          f"samples {[s['rss_mb'] for s in samples]} MB; growth {flat['growth_mb']} MB, "
          f"slope {flat['slope_mb_per_min']} MB/min; written to {out}")
    assert summary["errors"] == 0, summary["error_kinds"]
    assert len(samples) >= 3, samples
    assert flat["growth_mb"] < FLAT_BOUND_MB, flat
    assert customs(Chat(url).say("what is a trauma bond"), "answer")
