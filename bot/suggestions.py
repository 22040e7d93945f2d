"""Which topics to offer when the bot is not sure what the visitor asked."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

from bot.build import flat
from bot.content import SMALL_TALK, load_content

#: Offered when the classifier has no useful ranking.
DEFAULT_SUGGESTIONS = ("why_miss", "trauma_bond", "healing")
#: Topics that are never suggested (not questions a visitor would pick).
NOT_SUGGESTED = set(SMALL_TALK) | {"out_of_scope"}
MAX_SUGGESTIONS = 3
#: Below this confidence a topic is too unlikely to be worth a button.
MIN_CONFIDENCE = 0.02


def closest_topics(ranking: Sequence[Dict[str, Any]], limit: int = MAX_SUGGESTIONS) -> List[str]:
    """The best-ranked topic ids, padded with the defaults."""
    topics = load_content().topics
    chosen: List[str] = []
    for entry in ranking:
        name = entry.get("name")
        if (
            name in topics
            and name not in NOT_SUGGESTED
            and name not in chosen
            and (entry.get("confidence") or 0.0) >= MIN_CONFIDENCE
        ):
            chosen.append(name)
        if len(chosen) == limit:
            return chosen
    for name in DEFAULT_SUGGESTIONS:
        if name not in chosen and len(chosen) < limit:
            chosen.append(name)
    return chosen


def suggestion_buttons(topic_ids: Sequence[str]) -> List[Dict[str, str]]:
    topics = load_content().topics
    return [{"title": topics[t].question, "payload": f"/{t}"} for t in topic_ids]


def fallback_text(unavailable: bool = False) -> str:
    """ "I'm not sure I understood..." from messages.yml."""
    messages = load_content().messages
    return flat(messages["fallback_unavailable" if unavailable else "fallback"])
