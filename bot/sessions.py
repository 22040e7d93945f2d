"""Conversation sessions: one also ends after many visitor messages, and checking costs one look back.

- Rasa replays every event of the current session for many of its steps,
  so a message costs more the longer the session is. A new session (Rasa's
  own ``action_session_start``, slots carried over) every
  ``MAX_MESSAGES_PER_SESSION`` visitor messages keeps the cost flat. Nobody
  types a hundred messages without a pause, so people never notice; a script
  that floods one conversation can no longer make the server slow for everyone.
- Before every message Rasa asks whether the session has expired by building
  the list of the conversation's applied events twice (once to see whether
  there are any, once to find the last visitor message). One walk back from
  the last event to the session start answers both, and the message count
  above. Where that walk could differ from Rasa's replay (an undo or a
  rewind in the session) Rasa's own check runs.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Dict, Optional

from rasa.shared.core.events import ActionReverted, Restarted, SessionStarted, UserUttered, UserUtteranceReverted

MAX_MESSAGES_PER_SESSION = 100

_INSTALLED = False


@dataclass(frozen=True)
class SessionFacts:
    """What the session checks need, from one walk back through the events."""

    has_applied_events: bool  # anything after the last restart or session start
    last_message_at: Optional[float]  # the latest visitor message since then
    messages: int  # visitor messages since the latest session start


_UNDO = {UserUtteranceReverted.type_name, ActionReverted.type_name}
_CACHE_ATTRIBUTE = "_bot_session_facts"


def session_facts(tracker: Any) -> Optional[SessionFacts]:
    """The facts, or None when an undo or rewind makes Rasa's replay necessary.

    Kept with the tracker and brought up to date with the events appended
    since, so a long session is not walked again for every message.
    """
    events = tracker.events
    cached = getattr(tracker, _CACHE_ATTRIBUTE, None)
    if cached is not None:
        consumed, last, facts = cached
        if consumed <= len(events) and (consumed == 0 or events[consumed - 1] is last):
            for event in itertools.islice(events, consumed, None):
                facts = _forward(facts, event)
                if facts is None:
                    break
            _remember(tracker, facts)
            return facts
    facts = _walk_back(events)
    _remember(tracker, facts)
    return facts


def _remember(tracker: Any, facts: Optional[SessionFacts]) -> None:
    events = tracker.events
    if facts is None:
        tracker.__dict__.pop(_CACHE_ATTRIBUTE, None)
    else:
        setattr(tracker, _CACHE_ATTRIBUTE, (len(events), events[-1] if events else None, facts))


def _forward(facts: SessionFacts, event: Any) -> Optional[SessionFacts]:
    kind = event.type_name
    if kind in _UNDO:
        return None
    if kind == SessionStarted.type_name:
        return SessionFacts(False, None, 0)
    if kind == Restarted.type_name:
        return SessionFacts(False, None, facts.messages)
    if kind == UserUttered.type_name:
        return SessionFacts(True, event.timestamp, facts.messages + 1)
    return SessionFacts(True, facts.last_message_at, facts.messages) if not facts.has_applied_events else facts


def _walk_back(events: Any) -> Optional[SessionFacts]:
    messages = 0
    applied = 0
    last_message_at: Optional[float] = None
    reset_seen = False
    for event in reversed(events):
        kind = event.type_name  # a string compare: isinstance on Rasa's event classes is slow
        if kind in _UNDO:
            return None
        if kind == SessionStarted.type_name:
            break
        if kind == Restarted.type_name:
            reset_seen = True  # Rasa forgets what came before; the message count goes on
        elif kind == UserUttered.type_name:
            messages += 1
            if not reset_seen and last_message_at is None:
                last_message_at = event.timestamp
        if not reset_seen:
            applied += 1
    return SessionFacts(applied > 0, last_message_at, messages)


def messages_in_session(tracker: Any) -> int:
    """Visitor messages since the latest session start (counting back from the end)."""
    count = 0
    for event in reversed(tracker.events):
        if event.type_name == SessionStarted.type_name:
            break
        if event.type_name == UserUttered.type_name:
            count += 1
    return count


def install() -> None:
    """Changes Rasa's session checks, once per process."""
    global _INSTALLED
    if _INSTALLED:
        return
    import time

    from rasa.core.processor import MessageProcessor

    original_expired = MessageProcessor._has_session_expired
    original_update = MessageProcessor._update_tracker_session

    def _has_session_expired(self: MessageProcessor, tracker: Any) -> bool:
        config = self.domain.session_config
        if not config.are_sessions_enabled():
            return False
        facts = session_facts(tracker)
        if facts is None:
            expired = original_expired(self, tracker)
            count = messages_in_session(tracker)
        else:
            # As Rasa: expired when the last visitor message is older than the expiry time.
            last = facts.last_message_at
            expired = last is not None and (time.time() - last) / 60 > config.session_expiration_time
            count = facts.messages
        return expired or count >= MAX_MESSAGES_PER_SESSION

    async def _update_tracker_session(self: MessageProcessor, tracker: Any, output_channel: Any, metadata: Optional[Dict] = None) -> None:
        facts = session_facts(tracker)
        if facts is not None and facts.has_applied_events and not self._has_session_expired(tracker):
            return  # what Rasa concludes too, without building the applied events
        await original_update(self, tracker, output_channel, metadata)

    MessageProcessor._has_session_expired = _has_session_expired  # type: ignore[assignment]
    MessageProcessor._update_tracker_session = _update_tracker_session  # type: ignore[assignment]
    _INSTALLED = True
