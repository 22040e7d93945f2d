"""The one-walk session checks decide what Rasa's own checks decide."""
from __future__ import annotations

import time
import types
from typing import Any, List, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from rasa.core.processor import MessageProcessor
from rasa.shared.core.domain import Domain, SessionConfig
from rasa.shared.core.events import (
    ActionExecuted,
    ActionReverted,
    BotUttered,
    Restarted,
    SessionStarted,
    UserUttered,
    UserUtteranceReverted,
)
from rasa.shared.core.trackers import DialogueStateTracker

from bot import sessions

sessions.install()
NOW = time.time()
KINDS = ["user", "user_old", "bot", "action", "session", "restart", "rewind", "undo"]


def _event(kind: str) -> Any:
    return {
        "user": lambda: UserUttered("hi", {"name": "greet", "confidence": 1.0}, timestamp=NOW - 30),
        "user_old": lambda: UserUttered("hi", {"name": "greet", "confidence": 1.0}, timestamp=NOW - 7200),
        "bot": lambda: BotUttered("hello", timestamp=NOW - 20),
        "action": lambda: ActionExecuted("action_listen", timestamp=NOW - 20),
        "session": lambda: SessionStarted(timestamp=NOW - 10),
        "restart": lambda: Restarted(timestamp=NOW - 10),
        "rewind": lambda: UserUtteranceReverted(timestamp=NOW - 5),
        "undo": lambda: ActionReverted(timestamp=NOW - 5),
    }[kind]()


def _rasa_expired(tracker: DialogueStateTracker, expiry_minutes: float) -> bool:
    """Rasa 3.6's check (time since the last applied visitor message) plus the message cap."""
    last = tracker.get_last_event_for(UserUttered)
    by_time = last is not None and (time.time() - last.timestamp) / 60 > expiry_minutes
    return by_time or sessions.messages_in_session(tracker) >= sessions.MAX_MESSAGES_PER_SESSION


@settings(max_examples=400, deadline=None)
@given(kinds=st.lists(st.sampled_from(KINDS), max_size=40), extra_users=st.integers(0, 120))
def test_the_same_decisions_as_rasas_replay(kinds: List[str], extra_users: int) -> None:
    tracker = DialogueStateTracker("s", [])
    for kind in kinds + ["user"] * (extra_users if "session" not in kinds[-3:] else 0):
        tracker.update(_event(kind))
    processor = types.SimpleNamespace(domain=Domain.empty())
    processor.domain.session_config = SessionConfig(60, True)
    patched = MessageProcessor._has_session_expired
    assert patched(processor, tracker) == _rasa_expired(tracker, 60)
    facts = sessions.session_facts(tracker)
    if facts is not None:
        assert facts.has_applied_events == bool(tracker.applied_events())
        assert facts.messages == sessions.messages_in_session(tracker)
    else:
        assert any(isinstance(e, (UserUtteranceReverted, ActionReverted)) for e in tracker.events)


def test_a_session_ends_after_the_message_cap() -> None:
    tracker = DialogueStateTracker("s", [])
    tracker.update(SessionStarted())
    processor = types.SimpleNamespace(domain=Domain.empty())
    processor.domain.session_config = SessionConfig(60, True)
    for i in range(sessions.MAX_MESSAGES_PER_SESSION):
        assert not MessageProcessor._has_session_expired(processor, tracker), i
        tracker.update(UserUttered("hi", timestamp=time.time()))
    assert MessageProcessor._has_session_expired(processor, tracker)
