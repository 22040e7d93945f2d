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
- Rasa gets the current session of a conversation only (as from Rasa's own
  SQL tracker store): a conversation of 10 000 messages costs no more per
  message than one of ten. Every event stays stored for the review.
- A turn costs one indexed read (is the copy this process holds still the
  latest? if another server wrote since, only its new events are read) and
  one write of the new events; the write checks that nobody else wrote
  meanwhile, and reads the conversation again if someone did.
"""
from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Text, Tuple

import sqlalchemy as sa
import ujson
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from rasa.core.brokers.broker import EventBroker
from rasa.core.tracker_store import SerializedTrackerAsDict, TrackerStore
from rasa.shared.core.constants import ACTION_LISTEN_NAME
from rasa.shared.core.domain import Domain
from rasa.shared.core.events import ActionExecuted, Event, SessionStarted
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


#: The conversation row's columns that the review's filters use, kept up to date by every write.
SUMMARY_COLUMNS = ("turns", "had_crisis", "had_fallback", "min_confidence", "topics", "crisis_categories")
EMPTY_SUMMARY: Dict[str, Any] = {"turns": 0, "had_crisis": False, "had_fallback": False, "min_confidence": None, "topics": "", "crisis_categories": ""}


@dataclass(frozen=True)
class Stored:
    """What the database holds of one conversation, as this process last saw it."""

    count: int  # events stored
    summary: Optional[Dict[str, Any]]  # the row's SUMMARY_COLUMNS; None: there is no row yet


class _Conflict(Exception):
    """Someone else wrote the conversation since this process last saw it."""


class _Statements:
    """The statements of every turn, built once (building them was a third of their cost)."""

    def __init__(self) -> None:
        cid = sa.bindparam("cid")
        self.count = sa.select(conversations.c.event_count).where(conversations.c.id == cid)
        self.row = sa.select(conversations.c.event_count, *[conversations.c[c] for c in SUMMARY_COLUMNS]).where(conversations.c.id == cid)
        latest_session = (
            sa.select(sa.func.max(events.c.seq))
            .where(events.c.conversation_id == cid, events.c.type == SessionStarted.type_name)
            .scalar_subquery()
        )
        ordered = sa.select(events.c.data).where(events.c.conversation_id == cid).order_by(events.c.seq)
        self.session_events = ordered.where(events.c.seq >= sa.func.coalesce(latest_session, 0))
        self.all_events = ordered
        self.events_from = ordered.where(events.c.seq >= sa.bindparam("start"))
        self.insert_events = sa.insert(events)
        self.insert_row = sa.insert(conversations)
        values = {c: sa.bindparam(f"new_{c}") for c in ("last_active", "event_count", *SUMMARY_COLUMNS)}
        self.update_row = (
            sa.update(conversations)
            .where(conversations.c.id == cid, conversations.c.event_count == sa.bindparam("expected"))
            .values(**values)
        )


_STATEMENTS = _Statements()


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
        # The last trackers written (with how many of their events are stored, and
        # what the database holds), to carry on without reading the conversation
        # again, or when the database cannot be read.
        self._recent: "OrderedDict[str, Tuple[DialogueStateTracker, int, Optional[Stored]]]" = OrderedDict()
        self._recent_size = int(kwargs.get("recent_trackers", 1000))
        # For each tracker handed to Rasa: how many of its events are stored already,
        # and what the database held when it was handed out (None: not known).
        self._bases: "OrderedDict[str, Tuple[int, Optional[Stored]]]" = OrderedDict()
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
        base, stored = self._bases.get(sender, (0, None))
        if base == 0 and _is_placeholder(tracker):
            # Rasa saves every new conversation before its first message: nothing
            # to keep yet (the message's own save writes it all).
            return
        if not self._ensure_ready():
            self._keep(tracker, base)
            return
        try:
            # This tracker holds every event of its own pending copy: flush only the others.
            self._flush_pending(skip=sender)
            after = self._write(tracker, base, stored)
        except SQLAlchemyError as exc:
            logger.error("could not save a conversation (%s): kept in memory until the database is back", type(exc).__name__)
            self._keep(tracker, base)
            return
        with self._pending_lock:
            self._pending.pop(sender, None)
        self._set_base(sender, len(tracker.events), after)
        self._remember(tracker, len(tracker.events), after)

    def _set_base(self, sender: str, in_tracker: int, stored: Optional[Stored]) -> None:
        self._bases[sender] = (in_tracker, stored)
        self._bases.move_to_end(sender)
        while len(self._bases) > MAX_TRACKED_SENDERS:
            self._bases.popitem(last=False)

    async def retrieve(self, sender_id: Text) -> Optional[DialogueStateTracker]:
        return self._retrieve(sender_id, full=False)

    async def retrieve_full_tracker(self, conversation_id: Text) -> Optional[DialogueStateTracker]:
        """Every session of the conversation (Rasa's HTTP API), not only the current one."""
        return self._retrieve(conversation_id, full=True)

    def _retrieve(self, sender_id: str, full: bool) -> Optional[DialogueStateTracker]:
        with self._pending_lock:
            pending = self._pending.get(sender_id)
        if pending is not None:
            return self._hand_out(*pending)
        if self._ensure_ready():
            try:
                fresh = None if full else self._fresh_copy(sender_id)
                if fresh is not None:
                    return fresh
                tracker, stored = self._read(sender_id, full)
            except SQLAlchemyError as exc:
                logger.error("could not read a conversation (%s): using the copy in memory", type(exc).__name__)
            else:
                # A tracker just read is nobody else's: handed out as it is.
                self._set_base(sender_id, len(tracker.events) if tracker else 0, None if full else stored)
                return tracker
        with self._pending_lock:
            recent = self._recent.get(sender_id)
        return self._hand_out(recent[0], recent[1]) if recent else None

    def _fresh_copy(self, sender_id: str) -> Optional[DialogueStateTracker]:
        """The tracker this process wrote last, brought up to date with what others wrote since.

        One indexed read of the conversation's row instead of reading and
        replaying the conversation. When another server wrote meanwhile
        (round-robin behind a load balancer) only its new events are read and
        appended; an erasure, or anything that does not fit, and the
        conversation is read again as a whole. The tracker is handed over,
        not copied: it comes back with ``save`` (or is read again if the turn failed).
        """
        with self._pending_lock:
            recent = self._recent.get(sender_id)
        if recent is None or recent[2] is None:
            return None
        tracker, in_tracker, stored = recent
        cid = self._cid(sender_id)
        newer: List[Dict[str, Any]] = []
        with self.engine.connect() as connection:  # a database error leaves the copy for the fallback
            row = connection.execute(_STATEMENTS.row, {"cid": cid}).mappings().first()
            if row is None or row["event_count"] < stored.count:
                return None
            if row["event_count"] > stored.count:
                if in_tracker != len(tracker.events):
                    return None
                newer = [json.loads(r[0]) for r in connection.execute(_STATEMENTS.events_from, {"cid": cid, "start": stored.count})]
                if len(newer) != row["event_count"] - stored.count:
                    return None
        with self._pending_lock:
            if self._recent.get(sender_id) is not recent:
                return None  # another request took it meanwhile
            del self._recent[sender_id]
        if newer:
            for data in newer:
                event = Event.from_parameters(data)
                if event is not None:
                    tracker.update(event, self.domain)
            in_tracker = len(tracker.events)
            stored = Stored(row["event_count"], {c: row[c] for c in SUMMARY_COLUMNS})
        if in_tracker == len(tracker.events):
            tracker = self._current_session(tracker)
            in_tracker = len(tracker.events)
        self._set_base(sender_id, in_tracker, stored)
        return tracker

    def _current_session(self, tracker: DialogueStateTracker) -> DialogueStateTracker:
        """The tracker from its latest session start on (a new, shorter tracker if it held older sessions)."""
        events = tracker.events
        for index in range(len(events) - 1, 0, -1):
            if events[index].type_name == SessionStarted.type_name:  # faster than isinstance on Rasa's events
                return DialogueStateTracker.from_events(
                    tracker.sender_id, list(events)[index:], self.domain.slots, tracker._max_event_history
                )
        return tracker

    def _hand_out(self, tracker: DialogueStateTracker, stored: int) -> DialogueStateTracker:
        """A copy of ``tracker`` for Rasa, remembering how many of its events are already stored."""
        self._set_base(tracker.sender_id, stored, None)
        return tracker.copy()

    def _remember(self, tracker: DialogueStateTracker, in_tracker: int, stored: Optional[Stored]) -> None:
        if self._recent_size <= 0:
            return
        with self._pending_lock:
            self._recent[tracker.sender_id] = (tracker, in_tracker, stored)
            self._recent.move_to_end(tracker.sender_id)
            while len(self._recent) > self._recent_size:
                self._recent.popitem(last=False)

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
            after = self._write(tracker, base, None)
            with self._pending_lock:
                if self._pending.get(sender_id, (None,))[0] is tracker:
                    del self._pending[sender_id]
            self._set_base(sender_id, len(tracker.events), after)
            self._remember(tracker, len(tracker.events), after)
        if waiting:
            logger.info("database is back: wrote %d conversation(s) kept in memory", len(waiting))

    def _write(self, tracker: DialogueStateTracker, base: int, stored: Optional[Stored]) -> Optional[Stored]:
        """Appends the tracker's events from ``base`` on; returns what the database then holds.

        With ``stored`` (what the database held when the tracker was handed
        out) the new events are written straight away, on condition that the
        conversation still has that many events; otherwise, or if someone
        wrote meanwhile, the conversation's row is read first.
        """
        new = [event.as_dict() for event in itertools.islice(tracker.events, base, None)]  # only the new events are serialised
        if not new:
            return stored
        cid = self._cid(tracker.sender_id)
        if any(_is_delete_request(e) for e in new):
            self._erase_rows(cid)
            with self._pending_lock:
                self._recent.pop(tracker.sender_id, None)
            return Stored(0, None)
        redacted = [self.redact_event(e) for e in new]
        if stored is not None:
            try:
                with self.engine.begin() as connection:
                    return self._append(connection, cid, redacted, stored)
            except (_Conflict, IntegrityError):
                logger.info("a conversation was written elsewhere meanwhile: reading it before writing")
        with self.engine.begin() as connection:
            row = connection.execute(_STATEMENTS.row, {"cid": cid}).mappings().first()
            current = Stored(row["event_count"], {c: row[c] for c in SUMMARY_COLUMNS}) if row else Stored(0, None)
            return self._append(connection, cid, redacted, current)

    def _append(self, connection: sa.engine.Connection, cid: str, redacted: List[Dict[str, Any]], stored: Stored) -> Stored:
        summary = _merge_summary(stored.summary or EMPTY_SUMMARY, _summarise(redacted))
        now = time.time()
        count = stored.count + len(redacted)
        if stored.summary is None:
            connection.execute(
                _STATEMENTS.insert_row,
                {"id": cid, "channel": _channel(redacted), "started_at": redacted[0].get("timestamp") or now,
                 "last_active": now, "event_count": count, **summary},
            )
        else:
            updated = connection.execute(
                _STATEMENTS.update_row,
                {"cid": cid, "expected": stored.count, "new_last_active": now, "new_event_count": count,
                 **{f"new_{k}": v for k, v in summary.items()}},
            )
            if updated.rowcount != 1:
                raise _Conflict(cid)
        connection.execute(_STATEMENTS.insert_events, [_row(cid, stored.count + i, e) for i, e in enumerate(redacted)])
        return Stored(count, summary)

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

    def _read(self, sender_id: str, full: bool = False) -> Tuple[Optional[DialogueStateTracker], Stored]:
        """The conversation's current session (``full``: every session) and what the database holds."""
        cid = self._cid(sender_id)
        with self.engine.connect() as connection:
            row = connection.execute(_STATEMENTS.row, {"cid": cid}).mappings().first()
            if row is None:
                return None, Stored(0, None)
            stored = Stored(row["event_count"], {c: row[c] for c in SUMMARY_COLUMNS})
            query = _STATEMENTS.all_events if full else _STATEMENTS.session_events
            rows = connection.execute(query, {"cid": cid}).all()
        if not rows:
            return None, stored
        return DialogueStateTracker.from_dict(sender_id, [json.loads(r[0]) for r in rows], self.domain.slots), stored

    def erase(self, sender_id: str) -> int:
        """Deletes every event of a conversation; returns how many were deleted."""
        with self._pending_lock:
            self._pending.pop(sender_id, None)
            self._recent.pop(sender_id, None)
        return self._erase_rows(self._cid(sender_id))

    def _erase_rows(self, cid: str) -> int:
        with self.engine.begin() as connection:
            deleted = connection.execute(sa.delete(events).where(events.c.conversation_id == cid)).rowcount
            connection.execute(sa.delete(conversations).where(conversations.c.id == cid))
        return deleted or 0


def _is_placeholder(tracker: DialogueStateTracker) -> bool:
    """The tracker Rasa creates for a new conversation: one ``action_listen``, nothing else."""
    events = tracker.events
    return len(events) == 1 and isinstance(events[0], ActionExecuted) and events[0].action_name == ACTION_LISTEN_NAME


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
        "data": _to_json(event),
    }


def _merge_summary(current: Dict[str, Any], new: Dict[str, Any]) -> Dict[str, Any]:
    """The row's review columns after adding the summary of new events."""
    return {
        "turns": current["turns"] + new["turns"],
        "had_crisis": bool(current["had_crisis"] or new["had_crisis"]),
        "had_fallback": bool(current["had_fallback"] or new["had_fallback"]),
        "min_confidence": _min(current["min_confidence"], new["min_confidence"]),
        "topics": _merge_tags(current["topics"], new["topics"]),
        "crisis_categories": _merge_tags(current["crisis_categories"], new["crisis_categories"]),
    }


def _to_json(event: Dict[str, Any]) -> str:
    """The event as JSON: ujson (Rasa's own dependency, a third of the time), the standard
    library for what ujson refuses (numbers beyond 64 bits, NaN)."""
    try:
        return ujson.dumps(event, ensure_ascii=False, default=str)
    except (OverflowError, TypeError, ValueError):
        return json.dumps(event, ensure_ascii=False, default=str)


def _min(a: Optional[float], b: Optional[float]) -> Optional[float]:
    values = [v for v in (a, b) if v is not None]
    return min(values) if values else None


def _merge_tags(existing: str, new: List[str]) -> str:
    tags = [t for t in (existing or "").strip(",").split(",") if t]
    for tag in new:
        if tag and tag not in tags:
            tags.append(tag)
    return f",{','.join(tags)}," if tags else ""
