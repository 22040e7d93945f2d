"""Custom actions, run directly with the Rasa SDK's dispatcher (no server)."""
from __future__ import annotations

from typing import Any, Dict, List

import pytest
from rasa_sdk import Tracker
from rasa_sdk.executor import CollectingDispatcher

from actions.actions import ActionSuggestTopics
from bot.suggestions import DEFAULT_SUGGESTIONS


def tracker_with_ranking(ranking: List[Dict[str, Any]]) -> Tracker:
    return Tracker.from_dict(
        {
            "sender_id": "test",
            "slots": {},
            "latest_message": {"text": "hmm", "intent": {"name": "nlu_fallback"}, "intent_ranking": ranking},
            "events": [],
            "paused": False,
            "followup_action": None,
            "active_loop": {},
            "latest_action_name": "action_listen",
        }
    )


@pytest.fixture
def dispatcher() -> CollectingDispatcher:
    return CollectingDispatcher()


def test_suggests_the_closest_topics_in_ranking_order(dispatcher: CollectingDispatcher) -> None:
    ranking = [
        {"name": "nlu_fallback", "confidence": 0.3},
        {"name": "grief", "confidence": 0.25},
        {"name": "greet", "confidence": 0.2},
        {"name": "crisis", "confidence": 0.1},
        {"name": "healing", "confidence": 0.1},
        {"name": "setbacks", "confidence": 0.05},
        {"name": "why_miss", "confidence": 0.04},
    ]
    events = ActionSuggestTopics().run(dispatcher, tracker_with_ranking(ranking), {})
    assert events == []
    [message] = dispatcher.messages
    assert message["custom"] == {"type": "fallback", "suggestions": ["grief", "healing", "setbacks"]}
    assert [b["payload"] for b in message["buttons"]] == ["/grief", "/healing", "/setbacks"]
    assert message["buttons"][0]["title"] == "Why does leaving feel like grief?"
    assert "not sure" in message["text"]


def test_pads_with_default_topics_when_the_ranking_is_empty(dispatcher: CollectingDispatcher) -> None:
    ActionSuggestTopics().run(dispatcher, tracker_with_ranking([]), {})
    assert dispatcher.messages[0]["custom"]["suggestions"] == list(DEFAULT_SUGGESTIONS)


def test_never_suggests_small_talk_or_crisis(dispatcher: CollectingDispatcher) -> None:
    ranking = [{"name": n, "confidence": 0.2} for n in ("greet", "thanks", "goodbye", "out_of_scope", "crisis", "affirm")]
    ActionSuggestTopics().run(dispatcher, tracker_with_ranking(ranking), {})
    assert dispatcher.messages[0]["custom"]["suggestions"] == list(DEFAULT_SUGGESTIONS)
