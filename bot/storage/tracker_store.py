"""A Rasa tracker store that redacts before it writes and keeps answering when the database is down.

- Personal details are removed from user text, parse data, entities and slot
  values (``bot.redact``) before anything reaches the database; metadata
  (IP, user agent, anything a client sends) is dropped except the region.
- The sender id is stored only as a keyed hash, so a client that puts an
  e-mail address in its sender id leaves no trace of it either.
- "Delete this conversation" erases every event of the conversation at once.
- If the database is down, trackers stay in memory (the bot keeps answering,
  crisis handoffs included) and are written as soon as it is back: an
  acknowledged message is not lost while the process lives.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections import OrderedDict
from typing import Any, Dict, Iterable, List, Optional, Text, Tuple

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from rasa.core.brokers.broker import EventBroker
from rasa.core.tracker_store import SerializedTrackerAsDict, TrackerStore
from rasa.shared.core.domain import Domain
from rasa.shared.core.trackers import DialogueStateTracker

from bot.keys import secret_key
from bot.redact import default_redactor
from bot.storage import db
from bot.storage.schema import conversations, events

logger = logging.getLogger(__name__)

DELETE_INTENT = "delete_conversation"
#: Slots whose values are ours (categories, codes), never visitors' words.
SAFE_SLOTS = {"crisis_category", "language", "region"}
#: Slots never stored at all.
DROPPED_SLOTS = {"session_started_metadata"}
SAFE_ENTITIES = {"crisis_category", "language", "region"}
ALLOWED_METADATA = ("region",)
MAX_TRACKED_SENDERS = 100_000


def conversation_id(sender_id: str, key: bytes) -> str:
    """The stored id of a conversation: HMAC-SHA256 of the sender id (hex, 40 chars)."""
    return hmac.new(key, sender_id.encode("utf-8"), hashlib.sha256).hexdigest()[:40]


class RedactingTrackerStore(TrackerStore, SerializedTrackerAsDict):
    """SQL tracker store with redaction, hashed ids, erasure and an in-memory fallback."""

    def __init__(
        self,
        domain: Optional[Domain] = None,
        host: Optional[str] = None,
        db_url: Optional[str] = None,
        event_broker: Optional[EventBroker] = None,
        retention_days: Optional[float] = None,
        purge_interval_hours: float = 24.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(domain, event_broker, **kwargs)
        self.url = db_url or db.database_url()
        self.key = secret_key()
        self.redactor = default_redactor()
        # Trackers not written yet (the database was down), with how many of their
        # events were already stored: written when the database is back.
        self._pending: Dict[str, Tuple[DialogueStateTracker, int]] = {}
        # The last trackers written, to carry on a conversation if the database
        # cannot be read (never used while it can: other servers may have newer events).
        self._recent: "OrderedDict[str, Tuple[DialogueStateTracker, int]]" = OrderedDict()
        self._recent_size = int(kwargs.get("recent_trackers", 1000))
        # For each tracker handed to Rasa: how many of its events are stored already.
        self._bases: "OrderedDict[str, int]" = OrderedDict()
        self._pending_lock = threading.Lock()
        self._ready = False
        self._ensure_ready()
        from bot.storage import retention

        self.retention_days = retention.configured_days(retention_days)
        retention.start_daily_purge(self, purge_interval_hours)

    # ------------------------------------------------------------------ plumbing

    @property
    def engine(self) -> sa.engine.Engine:
        return db.engine(self.url)

    def _ensure_ready(self) -> bool:
        """Migrates the schema once; False while the database cannot be reached."""
        if self._ready:
            return True
        try:
            db.migrate(self.url)
            self._ready = True
        except Exception as exc:  # noqa: BLE001  (any driver error: the bot must keep answering)
            logger.error("database unavailable (%s): keeping conversations in memory", type(exc).__name__)
        return self._ready

    def _cid(self, sender_id: str) -> str:
        return conversation_id(sender_id, self.key)

    # ------------------------------------------------------------------ Rasa interface

    async def save(self, tracker: DialogueStateTracker) -> None:
        await self.stream_events(tracker)
        sender = tracker.sender_id
        base = self._bases.get(sender, 0)
        if not self._ensure_ready():
            self._keep(tracker, base)
            return
        try:
            # This tracker holds every event of its own pending copy: flush only the others.
            self._flush_pending(skip=sender)
            written = self._write(tracker, base)
        except SQLAlchemyError as exc:
            logger.error("could not save a conversation (%s): kept in memory until the database is back", type(exc).__name__)
            self._keep(tracker, base)
            return
        with self._pending_lock:
            self._pending.pop(sender, None)
        self._set_base(sender, written)
        self._remember(tracker, written)

    def _set_base(self, sender: str, stored: int) -> None:
        self._bases[sender] = stored
        self._bases.move_to_end(sender)
        while len(self._bases) > MAX_TRACKED_SENDERS:
            self._bases.popitem(last=False)

    async def retrieve(self, sender_id: Text) -> Optional[DialogueStateTracker]:
        with self._pending_lock:
            pending = self._pending.get(sender_id)
        if pending is not None:
            return self._hand_out(*pending)
        if self._ensure_ready():
            try:
                fresh = self._fresh_copy(sender_id)
                if fresh is not None:
                    return fresh
                tracker = self._read(sender_id)
            except SQLAlchemyError as exc:
                logger.error("could not read a conversation (%s): using the copy in memory", type(exc).__name__)
            else:
                return self._hand_out(tracker, len(tracker.events)) if tracker else None
        with self._pending_lock:
            recent = self._recent.get(sender_id)
        return self._hand_out(*recent) if recent else None

    def _fresh_copy(self, sender_id: str) -> Optional[DialogueStateTracker]:
        """The tracker this process wrote last, if the database holds nothing newer.

        One indexed read of the event count instead of reading and replaying
        every event: a conversation usually stays on one server. Another
        server's write (or an erasure) changes the count, and then the
        database is read as before. The tracker is handed over, not copied:
        it comes back with ``save`` (or is read again if the turn failed).
        """
        with self._pending_lock:
            recent = self._recent.get(sender_id)
        if recent is None:
            return None
        tracker, stored = recent
        with self.engine.connect() as connection:  # a database error leaves the copy for the fallback
            row = connection.execute(
                sa.select(conversations.c.event_count).where(conversations.c.id == self._cid(sender_id))
            ).first()
        with self._pending_lock:
            if self._recent.get(sender_id) is not recent:
                return None  # another request took it meanwhile
            del self._recent[sender_id]
        if row is None or row[0] != stored:
            return None
        self._set_base(sender_id, stored)
        return tracker

    def _hand_out(self, tracker: DialogueStateTracker, stored: int) -> DialogueStateTracker:
        """A copy of ``tracker`` for Rasa, remembering how many of its events are already stored."""
        self._set_base(tracker.sender_id, stored)
        return tracker.copy()

    def _remember(self, tracker: DialogueStateTracker, stored: int) -> None:
        if self._recent_size <= 0:
            return
        with self._pending_lock:
            self._recent[tracker.sender_id] = (tracker, stored)
            self._recent.move_to_end(tracker.sender_id)
            while len(self._recent) > self._recent_size:
                self._recent.popitem(last=False)

    async def retrieve_full_tracker(self, conversation_id: Text) -> Optional[DialogueStateTracker]:
        return await self.retrieve(conversation_id)

    async def keys(self) -> Iterable[Text]:
        """Stored conversation ids (hashed: the raw sender ids are not kept)."""
        with self.engine.connect() as connection:
            return [row[0] for row in connection.execute(sa.select(conversations.c.id))]

    async def delete(self, sender_id: Text) -> None:
        self.erase(sender_id)

    # ------------------------------------------------------------------ writing

    def _keep(self, tracker: DialogueStateTracker, base: int) -> None:
        with self._pending_lock:
            self._pending[tracker.sender_id] = (tracker, base)

    def _flush_pending(self, skip: Optional[str] = None) -> None:
        with self._pending_lock:
            waiting = [(k, v) for k, v in self._pending.items() if k != skip]
        for sender_id, (tracker, base) in waiting:
            written = self._write(tracker, base)
            with self._pending_lock:
                if self._pending.get(sender_id, (None,))[0] is tracker:
                    del self._pending[sender_id]
            self._set_base(sender_id, written)
            self._remember(tracker, written)
        if waiting:
            logger.info("database is back: wrote %d conversation(s) kept in memory", len(waiting))

    def _write(self, tracker: DialogueStateTracker, base: int) -> int:
        """Appends the tracker's events from ``base`` on; returns how many of its events are stored."""
        cid = self._cid(tracker.sender_id)
        tracked = list(tracker.events)
        total = len(tracked)
        new = [event.as_dict() for event in tracked[base:]]  # only the new events are serialised
        if not new:
            return total
        with self.engine.begin() as connection:
            row = connection.execute(
                sa.select(
                    conversations.c.event_count,
                    conversations.c.turns,
                    conversations.c.had_crisis,
                    conversations.c.had_fallback,
                    conversations.c.min_confidence,
                    conversations.c.topics,
                    conversations.c.crisis_categories,
                ).where(conversations.c.id == cid)
            ).mappings().first()
            stored = row["event_count"] if row else 0
            if any(_is_delete_request(e) for e in new):
                connection.execute(sa.delete(events).where(events.c.conversation_id == cid))
                connection.execute(sa.delete(conversations).where(conversations.c.id == cid))
                with self._pending_lock:
                    self._recent.pop(tracker.sender_id, None)
                return total
            redacted = [self.redact_event(e) for e in new]
            now = time.time()
            summary = _summarise(redacted)
            if row is None:
                connection.execute(
                    sa.insert(conversations).values(
                        id=cid,
                        channel=_channel(redacted),
                        started_at=redacted[0].get("timestamp") or now,
                        last_active=now,
                        event_count=0,
                        turns=0,
                        had_crisis=False,
                        had_fallback=False,
                        min_confidence=None,
                        topics="",
                        crisis_categories="",
                    )
                )
                current = {"turns": 0, "had_crisis": False, "had_fallback": False, "min_confidence": None, "topics": "", "crisis_categories": ""}
            else:
                current = dict(row)
            connection.execute(
                sa.insert(events),
                [_row(cid, stored + i, e) for i, e in enumerate(redacted)],
            )
            connection.execute(
                sa.update(conversations)
                .where(conversations.c.id == cid)
                .values(
                    last_active=now,
                    event_count=stored + len(redacted),
                    turns=current["turns"] + summary["turns"],
                    had_crisis=bool(current["had_crisis"] or summary["had_crisis"]),
                    had_fallback=bool(current["had_fallback"] or summary["had_fallback"]),
                    min_confidence=_min(current["min_confidence"], summary["min_confidence"]),
                    topics=_merge_tags(current["topics"], summary["topics"]),
                    crisis_categories=_merge_tags(current["crisis_categories"], summary["crisis_categories"]),
                )
            )
        return total

    def redact_event(self, event: Dict[str, Any]) -> Dict[str, Any]:
        """A copy of a serialised Rasa event with every personal detail removed."""
        event = dict(event)
        kind = event.get("event")
        redact = self.redactor.redact
        if "metadata" in event:
            metadata = event.get("metadata") or {}
            event["metadata"] = {k: metadata[k] for k in ALLOWED_METADATA if isinstance(metadata.get(k), str)}
        if kind == "user":
            event["text"] = redact(event.get("text") or "")
            parse = dict(event.get("parse_data") or {})
            parse["text"] = event["text"]
            parse["entities"] = [self._redact_entity(e) for e in parse.get("entities") or []]
            parse.pop("metadata", None)
            keep = ("intent", "intent_ranking", "entities", "text", "danger", "message_id")
            event["parse_data"] = {k: v for k, v in parse.items() if k in keep}
        # Bot messages are the project's own pre-written text: stored as sent,
        # so advocates read exactly what the visitor saw.
        elif kind == "slot":
            name = event.get("name")
            if name in DROPPED_SLOTS:
                event["value"] = None
            elif name not in SAFE_SLOTS:
                event["value"] = self.redactor.redact_value(event.get("value"))
        elif kind == "session_started":
            event["metadata"] = {}
        return event

    def _redact_entity(self, entity: Dict[str, Any]) -> Dict[str, Any]:
        entity = dict(entity)
        if entity.get("entity") not in SAFE_ENTITIES:
            entity["value"] = self.redactor.redact_value(entity.get("value"))
            entity.pop("text", None)
        return entity

    # ------------------------------------------------------------------ reading and erasing

    def _read(self, sender_id: str) -> Optional[DialogueStateTracker]:
        cid = self._cid(sender_id)
        with self.engine.connect() as connection:
            rows = connection.execute(
                sa.select(events.c.data).where(events.c.conversation_id == cid).order_by(events.c.seq)
            ).all()
        if not rows:
            return None
        return DialogueStateTracker.from_dict(sender_id, [json.loads(r[0]) for r in rows], self.domain.slots)

    def erase(self, sender_id: str) -> int:
        """Deletes every event of a conversation; returns how many were deleted."""
        cid = self._cid(sender_id)
        with self._pending_lock:
            self._pending.pop(sender_id, None)
            self._recent.pop(sender_id, None)
        with self.engine.begin() as connection:
            deleted = connection.execute(sa.delete(events).where(events.c.conversation_id == cid)).rowcount
            connection.execute(sa.delete(conversations).where(conversations.c.id == cid))
        return deleted or 0


def _is_delete_request(event: Dict[str, Any]) -> bool:
    return event.get("event") == "user" and ((event.get("parse_data") or {}).get("intent") or {}).get("name") == DELETE_INTENT


def _channel(redacted: List[Dict[str, Any]]) -> Optional[str]:
    for event in redacted:
        if event.get("event") == "user" and event.get("input_channel"):
            return str(event["input_channel"])[:32]
    return None


def _summarise(redacted: List[Dict[str, Any]]) -> Dict[str, Any]:
    """What the review's filters need from these events."""
    summary: Dict[str, Any] = {"turns": 0, "had_crisis": False, "had_fallback": False, "min_confidence": None, "topics": [], "crisis_categories": []}
    for event in redacted:
        if event.get("event") == "user":
            summary["turns"] += 1
            intent = (event.get("parse_data") or {}).get("intent") or {}
            confidence = intent.get("confidence")
            if isinstance(confidence, (int, float)):
                summary["min_confidence"] = _min(summary["min_confidence"], float(confidence))
            if intent.get("name") == "nlu_fallback":
                summary["had_fallback"] = True
        elif event.get("event") == "bot":
            custom = (event.get("data") or {}).get("custom") or {}
            if custom.get("type") == "answer" and custom.get("topic"):
                summary["topics"].append(custom["topic"])
            elif custom.get("type") == "crisis_handoff":
                summary["had_crisis"] = True
                summary["crisis_categories"].append(custom.get("category") or "")
            elif custom.get("type") == "fallback":
                summary["had_fallback"] = True
    return summary


def _row(cid: str, seq: int, event: Dict[str, Any]) -> Dict[str, Any]:
    kind = event.get("event") or "unknown"
    intent = ((event.get("parse_data") or {}).get("intent") or {}) if kind == "user" else {}
    text = event.get("text") if kind in ("user", "bot") and isinstance(event.get("text"), str) else None
    return {
        "conversation_id": cid,
        "seq": seq,
        "type": str(kind)[:64],
        "timestamp": float(event.get("timestamp") or time.time()),
        "intent": (intent.get("name") or None) if intent else None,
        "confidence": intent.get("confidence") if intent else None,
        "action": (event.get("name") if kind == "action" else None),
        "policy": (event.get("policy") if kind == "action" else None),
        "text": text,
        "data": json.dumps(event, ensure_ascii=False, default=str),
    }


def _min(a: Optional[float], b: Optional[float]) -> Optional[float]:
    values = [v for v in (a, b) if v is not None]
    return min(values) if values else None


def _merge_tags(existing: str, new: List[str]) -> str:
    tags = [t for t in (existing or "").strip(",").split(",") if t]
    for tag in new:
        if tag and tag not in tags:
            tags.append(tag)
    return f",{','.join(tags)}," if tags else ""
