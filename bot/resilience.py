"""Keeps the bot talking when the action server cannot be reached.

Rasa 3.6 logs a failed custom action and moves on without a word, so a
visitor whose message fell back would see nothing. This wraps
``RemoteAction.run``: if the action server is down, ``action_suggest_topics``
still offers the default topics (with a line saying part of the service is
having trouble) and any other custom action says that something went wrong.
The crisis handoff never depends on this: it is a domain response.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List

from rasa.core.actions import action as rasa_action
from rasa.shared.core.events import Event
from rasa.shared.exceptions import RasaException

logger = logging.getLogger(__name__)

_INSTALLED = False


def offline_reply(action_name: str) -> Dict[str, Any]:
    """What the visitor sees instead of a custom action's reply."""
    from bot.build import flat
    from bot.content import load_content
    from bot.suggestions import DEFAULT_SUGGESTIONS, fallback_text, suggestion_buttons

    if action_name == "action_suggest_topics":
        topics = list(DEFAULT_SUGGESTIONS)
        return {
            "text": fallback_text(unavailable=True),
            "buttons": suggestion_buttons(topics),
            "custom": {"type": "fallback", "suggestions": topics},
        }
    return {"text": flat(load_content().messages["degraded"])}


def install() -> None:
    """Wraps RemoteAction.run once per process."""
    global _INSTALLED
    if _INSTALLED:
        return
    original = rasa_action.RemoteAction.run

    async def run(self: rasa_action.RemoteAction, output_channel: Any, nlg: Any, tracker: Any, domain: Any) -> List[Event]:
        try:
            return await original(self, output_channel, nlg, tracker, domain)
        except rasa_action.ActionExecutionRejection:
            raise
        except RasaException as exc:
            logger.error("custom action %s failed (%s): answering without it", self.name(), type(exc).__name__)
            return [rasa_action.create_bot_utterance(offline_reply(self.name()))]

    rasa_action.RemoteAction.run = run  # type: ignore[assignment]
    rasa_action.RemoteAction._validate_action_result = _validate_with_compiled_schema(  # type: ignore[assignment]
        rasa_action.RemoteAction._validate_action_result
    )
    _INSTALLED = True


def _validate_with_compiled_schema(original: Any) -> Any:
    """Rasa checks the schema itself and builds a validator for every action
    result (a few milliseconds each time): build it once. Invalid results
    still go through Rasa's own method, for its error message."""
    compiled: Dict[str, Any] = {}

    def validate(self: rasa_action.RemoteAction, result: Dict[str, Any]) -> bool:
        validator = compiled.get("validator")
        if validator is None:
            from jsonschema.validators import validator_for

            schema = self.action_response_format_spec()
            validator = compiled["validator"] = validator_for(schema)(schema)
        if validator.is_valid(result):
            return True
        return original(self, result)

    return validate
