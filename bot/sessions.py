"""A conversation session also ends after many visitor messages, not only after an hour's silence.

Rasa's RulePolicy replays every event of the current session for each
prediction, so a message costs more the longer the session is: about 0.4 s
at the 1 000th message of one session here, and it keeps growing. A new
session (Rasa's own ``action_session_start``, slots carried over) every
``MAX_MESSAGES_PER_SESSION`` visitor messages keeps the cost flat. Nobody
types a hundred messages without a pause, so people never notice; a script
that floods one conversation can no longer make the server slow for everyone.
"""
from __future__ import annotations

from typing import Any

from rasa.shared.core.events import SessionStarted, UserUttered

MAX_MESSAGES_PER_SESSION = 100

_INSTALLED = False


def messages_in_session(tracker: Any) -> int:
    """Visitor messages since the latest session start (counting back from the end)."""
    count = 0
    for event in reversed(tracker.events):
        if isinstance(event, SessionStarted):
            break
        if isinstance(event, UserUttered):
            count += 1
    return count


def install() -> None:
    """Adds the message count to Rasa's session expiry check, once per process."""
    global _INSTALLED
    if _INSTALLED:
        return
    from rasa.core.processor import MessageProcessor

    original = MessageProcessor._has_session_expired

    def _has_session_expired(self: MessageProcessor, tracker: Any) -> bool:
        if original(self, tracker):
            return True
        return self.domain.session_config.are_sessions_enabled() and (
            messages_in_session(tracker) >= MAX_MESSAGES_PER_SESSION
        )

    MessageProcessor._has_session_expired = _has_session_expired  # type: ignore[assignment]
    _INSTALLED = True
