"""What every channel does to an incoming message before Rasa sees it.

Text is cleaned (control characters, lone surrogates), capped in length
without ever dropping a danger phrase, and metadata is reduced to the keys the
bot needs, so that nothing identifying (IP, user agent) is stored.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Dict, Optional

from bot.danger import load_detector

#: Longest message passed to the NLU pipeline (characters). Longer messages are
#: cut, but a danger phrase anywhere in them is kept (see ``prepare_text``).
MAX_CHARS = 5000
#: Longest sender id accepted.
MAX_SENDER_CHARS = 128
#: Metadata keys that the bot uses; everything else is dropped.
ALLOWED_METADATA = ("region",)

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class BadRequest(ValueError):
    """A request the bot cannot take; its message says what to send instead."""


@dataclass(frozen=True)
class Inbound:
    text: str
    sender: str
    metadata: Dict[str, Any]
    truncated: bool = False


def clean_text(text: str) -> str:
    """Removes what cannot be shown or stored: control characters, lone surrogates."""
    text = _SURROGATE.sub("\ufffd", text)
    text = _CONTROL.sub(" ", text)
    return unicodedata.normalize("NFC", text)


def prepare_text(text: str) -> tuple:
    """Caps the text at ``MAX_CHARS``; a danger phrase beyond the cut is appended.

    Returns ``(text, truncated)``.
    """
    text = clean_text(text).strip()
    if len(text) <= MAX_CHARS:
        return text, False
    head = text[:MAX_CHARS]
    detector = load_detector()
    if detector.detect(head) is None:
        explanation = detector.explain(text)
        if explanation.hits:
            hit = explanation.hits[0]
            head = f"{head[: MAX_CHARS - 200]} … {hit.text}"
    return head, True


def clean_metadata(metadata: Any) -> Dict[str, Any]:
    """Only the keys the bot uses, as short strings."""
    if not isinstance(metadata, dict):
        return {}
    cleaned = {}
    for key in ALLOWED_METADATA:
        value = metadata.get(key)
        if isinstance(value, str) and len(value) <= 16:
            cleaned[key] = value
    return cleaned


def clean_sender(sender: Any) -> str:
    if not isinstance(sender, (str, int)) or isinstance(sender, bool):
        raise BadRequest("'sender' must be a string that identifies the conversation")
    sender = clean_text(str(sender)).strip()
    if not sender:
        raise BadRequest("'sender' must not be empty")
    if len(sender) > MAX_SENDER_CHARS:
        raise BadRequest(f"'sender' must be at most {MAX_SENDER_CHARS} characters")
    return sender


def inbound_from_payload(payload: Any, sender: Optional[str] = None) -> Inbound:
    """Validates a channel payload (``{"sender", "message", "metadata"}``)."""
    if not isinstance(payload, dict):
        raise BadRequest('send a JSON object: {"sender": "...", "message": "..."}')
    if sender is None:
        if "sender" not in payload:
            raise BadRequest("'sender' is missing: every message needs a conversation id")
        sender = clean_sender(payload.get("sender"))
    message = payload.get("message", "")
    if message is None:
        message = ""
    if isinstance(message, bool) or not isinstance(message, (str, int, float)):
        raise BadRequest("'message' must be a string")
    text, truncated = prepare_text(str(message))
    metadata = clean_metadata(payload.get("metadata") or payload.get("customData"))
    return Inbound(text=text, sender=sender, metadata=metadata, truncated=truncated)
