"""The evaluator: sends each case to the running bot over REST and scores the replies.

Every case is the first message of a fresh conversation. The scores are the
ones the issues set floors for: topic accuracy, confident wrong answers,
fallback rate, crisis recall (overall, per category, per language), false
handoffs and the first-turn disclaimer.
"""
from __future__ import annotations

import asyncio
import json
import uuid
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import aiohttp
import yaml

DEFAULT_URL = "http://127.0.0.1:5005/webhooks/rest/webhook"


@dataclass
class Outcome:
    """What the bot did with one case."""

    id: str
    text: str
    expect: str
    topic: Optional[str]
    category: Optional[str]
    lang: str
    answered: Optional[str] = None  # topic of the `answer` payload
    fallback: bool = False
    handoff: bool = False
    handoff_first: bool = False
    handoff_category: Optional[str] = None
    disclaimer: bool = False
    error: Optional[str] = None


@dataclass
class Report:
    cases: int
    topic_cases: int
    topic_accuracy: float
    confident_wrong_rate: float
    fallback_rate: float
    crisis_cases: int
    crisis_recall: float
    crisis_recall_by_category: Dict[str, float]
    crisis_recall_by_language: Dict[str, float]
    non_crisis_cases: int
    false_handoff_rate: float
    no_crisis_cases: int
    no_crisis_false_handoff_rate: float
    first_turn_disclaimer_rate: float
    errors: int
    misses: List[Dict[str, Any]] = field(default_factory=list)


def load_cases(path: Path) -> List[Dict[str, Any]]:
    """The ``cases`` of an evaluation file (the format of shared/eval/dev_cases.yml)."""
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    cases = raw["cases"] if isinstance(raw, dict) else raw
    return [c for c in cases if isinstance(c, dict) and "text" in c and "expect" in c]


def read_turn(case: Dict[str, Any], messages: List[Dict[str, Any]]) -> Outcome:
    """Reads the reply contract payloads of one bot turn."""
    outcome = Outcome(
        id=str(case.get("id", "")),
        text=case["text"],
        expect=case["expect"],
        topic=case.get("topic"),
        category=case.get("category"),
        lang=case.get("lang", "en"),
    )
    seen_other = False
    for message in messages:
        custom = message.get("custom") if isinstance(message, dict) else None
        kind = custom.get("type") if isinstance(custom, dict) else None
        if kind == "crisis_handoff":
            if not outcome.handoff:
                outcome.handoff_first = not seen_other
                outcome.handoff_category = custom.get("category")
            outcome.handoff = True
        elif kind == "answer":
            outcome.answered = outcome.answered or custom.get("topic")
            seen_other = True
        elif kind == "fallback":
            outcome.fallback = True
            seen_other = True
        elif kind == "disclaimer":
            outcome.disclaimer = True
    return outcome


async def _ask(session: aiohttp.ClientSession, url: str, case: Dict[str, Any]) -> Outcome:
    payload = {"sender": f"eval-{uuid.uuid4().hex}", "message": case["text"]}
    try:
        async with session.post(url, json=payload) as response:
            if response.status != 200:
                outcome = read_turn(case, [])
                outcome.error = f"HTTP {response.status}"
                return outcome
            return read_turn(case, await response.json())
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        outcome = read_turn(case, [])
        outcome.error = type(exc).__name__
        return outcome


async def run_cases(
    cases: List[Dict[str, Any]], url: str = DEFAULT_URL, concurrency: int = 4
) -> List[Outcome]:
    """Sends every case (concurrently, each in its own conversation)."""
    limit = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def one(case: Dict[str, Any]) -> Outcome:
            async with limit:
                return await _ask(session, url, case)

        return await asyncio.gather(*(one(c) for c in cases))


def _is_topic_case(o: Outcome) -> bool:
    return o.expect == "topic" or (o.expect == "no_crisis" and o.topic is not None)


def _topic_right(o: Outcome) -> bool:
    if o.handoff:
        return False
    if o.topic == "out_of_scope":
        return o.answered == "out_of_scope" or (o.fallback and o.answered is None)
    return o.answered == o.topic


def _rate(numerator: int, denominator: int) -> float:
    return round(numerator / denominator, 4) if denominator else 1.0


def score(outcomes: List[Outcome]) -> Report:
    topic = [o for o in outcomes if _is_topic_case(o)]
    crisis = [o for o in outcomes if o.expect == "crisis"]
    non_crisis = [o for o in outcomes if o.expect in ("topic", "no_crisis")]
    no_crisis = [o for o in outcomes if o.expect == "no_crisis"]
    right = [o for o in topic if _topic_right(o)]
    wrong = [o for o in topic if not _topic_right(o) and not o.handoff and o.answered and not o.fallback]
    fallback = [o for o in topic if o.fallback and o.topic != "out_of_scope"]
    recalled = [o for o in crisis if o.handoff and o.handoff_first]
    by_category: Dict[str, List[Outcome]] = defaultdict(list)
    by_language: Dict[str, List[Outcome]] = defaultdict(list)
    for o in crisis:
        by_category[o.category or "unknown"].append(o)
        by_language[o.lang].append(o)
    misses = []
    for o in outcomes:
        problem = None
        if o.error:
            problem = f"error: {o.error}"
        elif o.expect == "crisis" and not (o.handoff and o.handoff_first):
            problem = "missed crisis" if not o.handoff else "handoff not first"
        elif o.expect in ("topic", "no_crisis") and o.handoff:
            problem = f"false handoff ({o.handoff_category})"
        elif _is_topic_case(o) and not _topic_right(o):
            problem = "fallback" if o.fallback else f"wrong topic: {o.answered}"
        elif not o.disclaimer:
            problem = "no disclaimer on the first turn"
        if problem:
            misses.append({"id": o.id, "text": o.text, "expected": o.topic or o.category or o.expect, "problem": problem})
    return Report(
        cases=len(outcomes),
        topic_cases=len(topic),
        topic_accuracy=_rate(len(right), len(topic)),
        confident_wrong_rate=_rate(len(wrong), len(topic)) if topic else 0.0,
        fallback_rate=_rate(len(fallback), len(topic)) if topic else 0.0,
        crisis_cases=len(crisis),
        crisis_recall=_rate(len(recalled), len(crisis)),
        crisis_recall_by_category={
            k: _rate(sum(o.handoff and o.handoff_first for o in v), len(v)) for k, v in sorted(by_category.items())
        },
        crisis_recall_by_language={
            k: _rate(sum(o.handoff and o.handoff_first for o in v), len(v)) for k, v in sorted(by_language.items())
        },
        non_crisis_cases=len(non_crisis),
        false_handoff_rate=_rate(sum(o.handoff for o in non_crisis), len(non_crisis)) if non_crisis else 0.0,
        no_crisis_cases=len(no_crisis),
        no_crisis_false_handoff_rate=_rate(sum(o.handoff for o in no_crisis), len(no_crisis)) if no_crisis else 0.0,
        first_turn_disclaimer_rate=_rate(sum(o.disclaimer for o in outcomes), len(outcomes)),
        errors=sum(1 for o in outcomes if o.error),
        misses=misses,
    )


def format_report(report: Report, title: str = "") -> str:
    pct = lambda x: f"{100 * x:5.1f} %"  # noqa: E731
    lines = [title] if title else []
    lines += [
        f"cases                      {report.cases}",
        f"topic accuracy             {pct(report.topic_accuracy)}  ({report.topic_cases} topic cases)",
        f"confident wrong answers    {pct(report.confident_wrong_rate)}",
        f"fallback rate              {pct(report.fallback_rate)}",
        f"crisis recall              {pct(report.crisis_recall)}  ({report.crisis_cases} crisis cases)",
    ]
    for name, value in report.crisis_recall_by_category.items():
        lines.append(f"  {name:<24} {pct(value)}")
    for name, value in report.crisis_recall_by_language.items():
        lines.append(f"  language {name:<15} {pct(value)}")
    lines += [
        f"false handoffs             {pct(report.false_handoff_rate)}  (of {report.non_crisis_cases} non-crisis cases)",
        f"  of no_crisis cases       {pct(report.no_crisis_false_handoff_rate)}  (of {report.no_crisis_cases})",
        f"first-turn disclaimer      {pct(report.first_turn_disclaimer_rate)}",
        f"errors                     {report.errors}",
    ]
    if report.misses:
        lines.append(f"misses ({len(report.misses)}):")
        for miss in report.misses:
            lines.append(f"  [{miss['id']}] {miss['problem']:<28} expected {miss['expected']}: {miss['text']}")
    return "\n".join(lines)


def report_json(report: Report) -> str:
    return json.dumps(asdict(report), indent=2)


def evaluate(cases_path: Path, url: str = DEFAULT_URL, concurrency: int = 4) -> Report:
    outcomes = asyncio.run(run_cases(load_cases(cases_path), url=url, concurrency=concurrency))
    return score(outcomes)
