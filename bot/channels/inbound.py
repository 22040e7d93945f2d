"""What every channel does to an incoming message before Rasa sees it.

Text is cleaned (control characters, lone surrogates), capped in length
without ever dropping a danger phrase, and metadata is reduced to the keys the
bot needs, so that nothing identifying (IP, user agent) is stored.
"""
from __future__ import annotations

import json
import os
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from bot.danger import load_detector

#: Longest message passed to the NLU pipeline (characters). Longer messages are
#: cut, but a danger phrase anywhere in them is kept (see ``prepare_text``),
#: and the reply says that the message was cut.
MAX_CHARS = 5000
#: Largest request body (REST) or socket.io packet taken, in bytes
#: (``BOT_MAX_BODY_BYTES``, default 1 MiB). Larger REST bodies get a 413.
MAX_BODY_BYTES = int(os.environ.get("BOT_MAX_BODY_BYTES") or 1024 * 1024)
#: Room kept at the end of a cut message for the danger words found beyond the cut.
DANGER_ROOM = 200
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
    """Caps the text at ``MAX_CHARS``; danger words beyond the cut are appended.

    Returns ``(text, truncated)``. If the whole text signals danger but the
    first ``MAX_CHARS`` do not, the words around the most urgent hits (as the
    detector read them, with a little context) replace the end of the kept
    part, so the bot still hands off, with the same category.
    """
    text = clean_text(text).strip()
    if len(text) <= MAX_CHARS:
        return text, False
    head = text[:MAX_CHARS]
    detector = load_detector()
    if detector.detect(head) is None:
        detection = detector.detect(text)
        if detection is not None:
            explanation = detector.explain(text)
            for tail in (_danger_excerpt(explanation, detection.rule_id, context=c) for c in (6, 0)):
                candidate = f"{head[: MAX_CHARS - len(tail) - 3].rstrip()} … {tail}"
                if detector.detect(candidate) is not None:
                    break
            head = candidate
    return head, True


def _danger_excerpt(explanation: Any, best_rule: str, context: int) -> str:
    """The detector's words at its hits (with ``context`` words before each), most urgent
    first, in at most ``DANGER_ROOM`` characters."""
    words = explanation.words
    hits = sorted(explanation.hits, key=lambda h: (h.rule.id != best_rule, h.start))
    parts: List[str] = []
    for hit in hits:
        part = " ".join(words[max(0, hit.start - context) : hit.end])
        if part and part not in parts and sum(len(p) + 3 for p in parts) + len(part) <= DANGER_ROOM:
            parts.append(part)
    return " … ".join(parts) or hits[0].text[:DANGER_ROOM]


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


def parse_json_body(body: bytes) -> Any:
    """The JSON value of a request body; BadRequest if it is not JSON (or not UTF-8)."""
    if len(body) > MAX_BODY_BYTES:
        raise BadRequest(f"the body is larger than {MAX_BODY_BYTES} bytes")
    if not body.strip():
        raise BadRequest('the body is empty: send a JSON object {"sender": "...", "message": "..."}')
    try:
        return json.loads(body.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise BadRequest("the body is not valid UTF-8") from None
    except (ValueError, RecursionError):  # also numbers too long to convert, nesting too deep
        raise BadRequest("the body is not valid JSON") from None


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
