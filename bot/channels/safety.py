"""The last-resort reply: used when Rasa could not produce one.

If the tracker store, the model or anything else fails while a message is
handled, the channel still answers. A message that signals danger gets the
same crisis handoff the bot would have sent (built from the same content and
hotline files as ``domain/crisis.yml``); anything else gets a calm "something
went wrong", with the disclaimer.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Dict, List, Optional

from bot.build import crisis_response, fixed_responses, flat
from bot.content import load_content
from bot.danger import load_detector
from bot.hotlines import configured_region_id, regions


@lru_cache(maxsize=1)
def _responses() -> Dict[str, Any]:
    store = load_content()
    return {
        "crisis": crisis_response(regions(), store),
        **fixed_responses(store),
    }


def handoff_variation(category: str, region: str, language: str) -> Dict[str, Any]:
    """The ``utter_crisis_handoff`` variation for this category, region and language."""
    variations = _responses()["crisis"]
    wanted = {"crisis_category": category, "region": region, "language": language}
    for variation in variations:
        conditions = {c["name"]: c["value"] for c in variation.get("condition", [])}
        if conditions == wanted:
            return variation
    return variations[-1]  # the unconditional default


def signals_danger(text: str) -> bool:
    """Whether the danger detector (``data/danger/``) flags this text."""
    return load_detector().detect(text or "") is not None


def emergency_messages(text: str, region: Optional[str] = None) -> List[Dict[str, Any]]:
    """Messages (``text`` / ``custom``) for a turn that Rasa could not answer."""
    responses = _responses()
    detection = load_detector().detect(text or "")
    out: List[Dict[str, Any]] = []
    if detection:
        region_id = region if region in regions() else configured_region_id()
        variation = handoff_variation(detection.category, region_id, detection.language)
        out.append({"text": variation["text"]})
        out.append({"custom": variation["custom"]})
    else:
        out.append({"text": flat(load_content().messages["degraded"])})
    out.append({"custom": responses["utter_disclaimer"][0]["custom"]})
    return out


def emergency_turn(app: Any, inbound: Any, recipient_id: str) -> List[Dict[str, Any]]:
    """The REST form of ``emergency_messages`` (each message has a ``recipient_id``)."""
    return [
        {"recipient_id": recipient_id, **m}
        for m in emergency_messages(inbound.text, inbound.metadata.get("region"))
    ]


#: Notices the channels add to a turn, and their text in ``messages.yml``.
NOTICE_MESSAGES = {"message_truncated": "message_truncated", "rate_limited": "slow_down"}


def notice_text(reason: str) -> str:
    return flat(load_content().messages[NOTICE_MESSAGES[reason]])


def notice_messages(reason: str, **details: Any) -> List[Dict[str, Any]]:
    """A channel's own notice to the visitor: a text, then ``{"type": "notice", "reason": ...}``.

    Reasons: ``message_truncated`` (the message was cut at ``MAX_CHARS``; sent
    after the bot's answer) and ``rate_limited`` (socket.io: the message was
    not taken; ``retry_after`` says for how many seconds).
    """
    return [{"text": notice_text(reason)}, {"custom": {"type": "notice", "reason": reason, **details}}]
