"""Custom actions. Short ``run()`` methods; lookups live in ``bot/``.

Only what needs code runs here: the crisis handoff and every topic answer are
domain responses, so they keep working when this server is down.
"""
from __future__ import annotations

from typing import Any, Dict, List, Text

from rasa_sdk import Action, Tracker
from rasa_sdk.executor import CollectingDispatcher

from bot.suggestions import closest_topics, fallback_text, suggestion_buttons


class ActionSuggestTopics(Action):
    """Offers the closest topics as buttons when the bot is not sure what was asked."""

    def name(self) -> Text:
        return "action_suggest_topics"

    def run(
        self, dispatcher: CollectingDispatcher, tracker: Tracker, domain: Dict[Text, Any]
    ) -> List[Dict[Text, Any]]:
        ranking = (tracker.latest_message or {}).get("intent_ranking") or []
        topics = closest_topics(ranking)
        dispatcher.utter_message(
            text=fallback_text(),
            buttons=suggestion_buttons(topics),
            json_message={"type": "fallback", "suggestions": topics},
        )
        return []
