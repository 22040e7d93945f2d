"""Reading conversations for the review: filters, transcripts as turns, overview counts."""
from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

import sqlalchemy as sa

from bot.storage.schema import annotations, conversations, events

PAGE_SIZE = 50
#: Past this the offset would overflow the database's integers (a 500): no review list is that long.
MAX_PAGE = 1_000_000


@dataclass
class Filters:
    date_from: Optional[date] = None
    date_to: Optional[date] = None
    crisis: bool = False
    fallback: bool = False
    below: Optional[float] = None  # a turn with confidence below this
    topic: str = ""
    page: int = 1

    @classmethod
    def from_args(cls, args: Any) -> "Filters":
        def day(name: str) -> Optional[date]:
            try:
                return date.fromisoformat(args.get(name, ""))
            except ValueError:
                return None

        try:
            below = float(args["below"]) if args.get("below") else None
        except ValueError:
            below = None
        try:
            page = min(max(1, int(args.get("page", 1))), MAX_PAGE)
        except ValueError:
            page = 1
        topic = args.get("topic", "")
        return cls(
            date_from=day("from"),
            date_to=day("to"),
            crisis=args.get("crisis") == "1",
            fallback=args.get("fallback") == "1",
            below=below if below is not None and 0 <= below <= 1 else None,
            topic=topic if topic.replace("_", "").isalnum() else "",
            page=page,
        )


def _epoch(day: date, end: bool = False) -> float:
    moment = datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()
    return moment + (86400 if end else 0)


def list_conversations(conn: sa.engine.Connection, filters: Filters) -> Tuple[List[Dict[str, Any]], int]:
    query = sa.select(conversations)
    if filters.date_from:
        query = query.where(conversations.c.last_active >= _epoch(filters.date_from))
    if filters.date_to:
        query = query.where(conversations.c.started_at < _epoch(filters.date_to, end=True))
    if filters.crisis:
        query = query.where(conversations.c.had_crisis.is_(True))
    if filters.fallback:
        query = query.where(conversations.c.had_fallback.is_(True))
    if filters.below is not None:
        query = query.where(conversations.c.min_confidence < filters.below)
    if filters.topic:
        query = query.where(conversations.c.topics.like(f"%,{filters.topic},%"))
    total = conn.execute(sa.select(sa.func.count()).select_from(query.subquery())).scalar() or 0
    rows = conn.execute(
        query.order_by(conversations.c.last_active.desc()).limit(PAGE_SIZE).offset((filters.page - 1) * PAGE_SIZE)
    ).mappings().all()
    return [dict(r) | {"topic_list": [t for t in (r["topics"] or "").split(",") if t]} for r in rows], total


@dataclass
class Turn:
    seq: int
    at: float
    text: str
    intent: Optional[str]
    confidence: Optional[float]
    danger: Optional[Dict[str, Any]]
    replies: List[Dict[str, Any]] = field(default_factory=list)
    policies: List[str] = field(default_factory=list)
    annotations: List[Dict[str, Any]] = field(default_factory=list)


def transcript(conn: sa.engine.Connection, conversation_id: str) -> Optional[Dict[str, Any]]:
    meta = conn.execute(sa.select(conversations).where(conversations.c.id == conversation_id)).mappings().first()
    if meta is None:
        return None
    rows = conn.execute(
        sa.select(events.c.seq, events.c.type, events.c.timestamp, events.c.data)
        .where(events.c.conversation_id == conversation_id)
        .order_by(events.c.seq)
    ).all()
    notes = defaultdict(list)
    for note in conn.execute(
        sa.select(annotations).where(annotations.c.conversation_id == conversation_id).order_by(annotations.c.created_at)
    ).mappings():
        notes[note["event_seq"]].append(dict(note))
    turns: List[Turn] = []
    opening: List[Dict[str, Any]] = []
    for seq, kind, timestamp, data in rows:
        event = json.loads(data)
        if kind == "user":
            parse = event.get("parse_data") or {}
            intent = parse.get("intent") or {}
            turns.append(
                Turn(
                    seq=seq,
                    at=timestamp,
                    text=event.get("text") or "",
                    intent=intent.get("name"),
                    confidence=intent.get("confidence"),
                    danger=parse.get("danger"),
                    annotations=notes.get(seq, []),
                )
            )
        elif kind == "bot":
            reply = {"text": event.get("text"), **(event.get("data") or {})}
            (turns[-1].replies if turns else opening).append(reply)
        elif kind == "action" and turns and event.get("name") not in ("action_listen", None):
            policy = event.get("policy") or "-"
            turns[-1].policies.append(f"{event.get('name')} ← {policy}")
    return {"meta": dict(meta), "turns": turns, "opening": opening}


def overview(conn: sa.engine.Connection, days: int = 30, now: Optional[float] = None) -> Dict[str, Any]:
    now = now if now is not None else time.time()
    since = now - days * 86400
    rows = conn.execute(
        sa.select(conversations.c.last_active, conversations.c.had_crisis, conversations.c.had_fallback, conversations.c.topics)
        .where(conversations.c.last_active >= since)
    ).all()
    per_topic: Counter = Counter()
    per_day: Dict[str, Dict[str, int]] = {}
    for offset in range(days - 1, -1, -1):
        key = datetime.fromtimestamp(now - offset * 86400, tz=timezone.utc).strftime("%Y-%m-%d")
        per_day[key] = {"conversations": 0, "handoffs": 0, "fallbacks": 0}
    for last_active, crisis, fallback, topics in rows:
        key = datetime.fromtimestamp(last_active, tz=timezone.utc).strftime("%Y-%m-%d")
        bucket = per_day.setdefault(key, {"conversations": 0, "handoffs": 0, "fallbacks": 0})
        bucket["conversations"] += 1
        bucket["handoffs"] += int(bool(crisis))
        bucket["fallbacks"] += int(bool(fallback))
        per_topic.update(t for t in (topics or "").split(",") if t)
    return {"total": len(rows), "per_topic": per_topic.most_common(), "per_day": per_day, "days": days}


def bar_chart(series: Dict[str, Dict[str, int]], keys: List[str], width: int = 720, height: int = 220) -> Dict[str, Any]:
    """Geometry for an inline SVG bar chart (one group of bars per day)."""
    days = list(series)
    peak = max([series[d][k] for d in days for k in keys] + [1])
    group = (width - 40) / max(len(days), 1)
    bar = max(group / (len(keys) + 1), 1)
    bars = []
    for i, day in enumerate(days):
        for j, key in enumerate(keys):
            value = series[day][key]
            h = (height - 40) * value / peak
            bars.append({"x": 30 + i * group + j * bar, "y": height - 20 - h, "w": bar - 1, "h": h, "key": key, "day": day, "value": value})
    return {"width": width, "height": height, "bars": bars, "peak": peak, "first": days[0] if days else "", "last": days[-1] if days else ""}
