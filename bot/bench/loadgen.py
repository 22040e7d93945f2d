"""Load generator for the benchmark and the load tests: visitors over the REST channel.

Runs as its own process (``python -m bot.bench.loadgen``) so that the client's
work is not counted in the server's process, and prints one JSON object.
Every visitor holds conversations of 10 realistic messages (a greeting, eight
questions from the development set, a thank-you), each conversation with a
new sender id. Bounded in time and in count.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import aiohttp
import yaml

from bot import paths

GREETINGS = ["hi", "hello", "hey there", "hi, is anyone there?"]
THANKS = ["thank you", "thanks, that helps", "ok thanks", "thank u"]


def load_questions(cases_path: Optional[Path] = None) -> List[str]:
    """Visitor messages from the development set (topic, crisis and figurative ones)."""
    path = cases_path or paths.project_dir() / "tests" / "data" / "dev_cases.yml"
    cases = yaml.safe_load(Path(path).read_text(encoding="utf-8"))["cases"]
    return [c["text"] for c in cases if c.get("text")]


def conversation(rng: random.Random, questions: List[str]) -> List[str]:
    """Ten messages: greeting, eight questions, thanks."""
    return [rng.choice(GREETINGS), *rng.sample(questions, 8), rng.choice(THANKS)]


class Recorder:
    """Latencies and errors of one scenario."""

    def __init__(self) -> None:
        self.latencies: List[float] = []
        self.errors: Dict[str, int] = {}
        self.started = time.perf_counter()
        self.finished: Optional[float] = None

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def summary(self) -> Dict[str, object]:
        elapsed = (self.finished or time.perf_counter()) - self.started
        lat = sorted(self.latencies)
        return {
            "messages": len(lat),
            "errors": sum(self.errors.values()),
            "error_kinds": self.errors,
            "seconds": round(elapsed, 2),
            "per_second": round(len(lat) / elapsed, 1) if elapsed > 0 else 0.0,
            "p50_ms": _pct(lat, 50),
            "p95_ms": _pct(lat, 95),
            "p99_ms": _pct(lat, 99),
            "max_ms": round(lat[-1] * 1000, 1) if lat else None,
            "mean_ms": round(statistics.fmean(lat) * 1000, 1) if lat else None,
        }


def _pct(sorted_values: List[float], pct: float) -> Optional[float]:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, max(0, round(pct / 100 * len(sorted_values) + 0.5) - 1))
    return round(sorted_values[index] * 1000, 1)


async def send(session: aiohttp.ClientSession, url: str, sender: str, text: str, rec: Recorder, timeout: float) -> None:
    start = time.perf_counter()
    try:
        # The header is what the widget sends: with the "conversation"
        # balance nginx keeps a conversation on one server.
        async with session.post(url, json={"sender": sender, "message": text},
                                headers={"X-Conversation-Id": sender},
                                timeout=aiohttp.ClientTimeout(total=timeout)) as response:
            body = await response.read()
            if response.status != 200:
                rec.error(f"http_{response.status}")
                return
            replies = json.loads(body)
            if not isinstance(replies, list) or not replies:
                rec.error("no_reply")
                return
    except asyncio.TimeoutError:
        rec.error("timeout")
        return
    except (aiohttp.ClientError, ValueError, OSError) as exc:
        rec.error(type(exc).__name__)
        return
    rec.latencies.append(time.perf_counter() - start)


async def visitor(n: int, args: argparse.Namespace, questions: List[str], session: aiohttp.ClientSession,
                  rec: Recorder, deadline: float) -> None:
    rng = random.Random(args.seed * 100_003 + n)
    url = args.url.rstrip("/") + "/webhooks/rest/webhook"
    conv = 0
    if args.mode == "steady":  # visitors arrive spread over the first think time
        await asyncio.sleep(rng.uniform(0, args.think_max))
    while time.perf_counter() < deadline and conv < args.conversations:
        sender = f"bench-{args.seed}-{n}-{conv}"
        for text in conversation(rng, questions):
            if time.perf_counter() >= deadline:
                return
            await send(session, url, sender, text, rec, args.timeout)
            if args.mode == "steady":
                await asyncio.sleep(rng.uniform(args.think_min, args.think_max))
        conv += 1


async def run(args: argparse.Namespace) -> Dict[str, object]:
    questions = load_questions(Path(args.cases) if args.cases else None)
    rec = Recorder()
    deadline = time.perf_counter() + args.duration
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(visitor(i, args, questions, session, rec, deadline) for i in range(args.visitors)))
    rec.finished = time.perf_counter()
    return {"mode": args.mode, "visitors": args.visitors, **rec.summary()}


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="Rasa server base URL, e.g. http://127.0.0.1:5005")
    parser.add_argument("--mode", choices=["burst", "steady"], default="burst",
                        help="burst: each visitor writes back to back; steady: waits 2-4 s between messages")
    parser.add_argument("--visitors", type=int, default=1)
    parser.add_argument("--duration", type=float, default=30.0, help="stop after this many seconds")
    parser.add_argument("--conversations", type=int, default=1_000_000, help="stop each visitor after this many")
    parser.add_argument("--think-min", type=float, default=2.0)
    parser.add_argument("--think-max", type=float, default=4.0)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds before a request counts as an error")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cases", default=None, help="YAML file with cases (default tests/data/dev_cases.yml)")
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    try:
        import uvloop  # noqa: F401  (installed with Rasa; a faster client loop)
        uvloop.install()
    except ImportError:
        pass
    result = asyncio.run(run(args))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
