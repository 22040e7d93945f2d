"""Rasa runs each action on a copy of the whole conversation: not when nothing needs one.

Before running an action, Rasa 3.6's message processor copies the tracker
(replaying every event of the conversation) so that the events a policy
attached to its prediction can be tried out and thrown away if the action
is rejected. The actions this bot runs only read the tracker, and the
events attached are almost always only Rasa's note on how the last message
was featurised, which changes no slot. So the copy is skipped:

- for a response, ``action_listen`` or the session start (they read the
  slots only, and are never rejected), when the attached events change no
  slot (none, or only that note);
- for a custom action (it sends the whole conversation to the action
  server), only when no events are attached.

Anything else (slot events from a policy, forms and other actions that may
change the tracker they get) runs on a copy as before.
"""
from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("rasa.core.processor")  # Rasa's own logger: its messages are unchanged
_INSTALLED = False
_original_run_action: Any = None


def _needs_copy(action: Any, prediction: Any) -> bool:
    from rasa.core.actions.action import ActionBotResponse, ActionListen, ActionSessionStart, RemoteAction
    from rasa.shared.core.events import DefinePrevUserUtteredFeaturization

    kind = type(action)
    if kind in (ActionBotResponse, ActionListen, ActionSessionStart):
        return not all(type(e) is DefinePrevUserUtteredFeaturization for e in prediction.events)
    if kind is RemoteAction:
        return bool(prediction.events)
    return True


def install() -> None:
    """Wraps ``MessageProcessor._run_action`` once per process."""
    global _INSTALLED, _original_run_action
    if _INSTALLED:
        return
    from rasa.core.processor import MessageProcessor

    original = _original_run_action = MessageProcessor._run_action

    async def _run_action(self: MessageProcessor, action: Any, tracker: Any, output_channel: Any, nlg: Any, prediction: Any) -> bool:
        if _needs_copy(action, prediction):
            return await original(self, action, tracker, output_channel, nlg, prediction)
        return await _run_without_copy(self, action, tracker, output_channel, nlg, prediction)

    MessageProcessor._run_action = _run_action  # type: ignore[assignment]
    _INSTALLED = True


async def _run_without_copy(processor: Any, action: Any, tracker: Any, output_channel: Any, nlg: Any, prediction: Any) -> bool:
    """Rasa 3.6's ``MessageProcessor._run_action``, step for step, minus the copy."""
    from rasa.core.actions.action import ActionExecutionRejection
    from rasa.shared.core.constants import ACTION_LISTEN_NAME
    from rasa.shared.core.events import ActionExecutionRejected, UserUttered
    from rasa.shared.constants import UTTER_PREFIX

    try:
        events = await action.run(output_channel, nlg, tracker, processor.domain)
    except ActionExecutionRejection:
        events = [ActionExecutionRejected(action.name(), prediction.policy_name, prediction.max_confidence)]
        tracker.update(events[0])
        return processor.should_predict_another_action(action.name())
    except Exception:
        logger.exception(
            f"Encountered an exception while running action '{action.name()}'."
            "Bot will continue, but the actions events are lost. "
            "Please check the logs of your action server for "
            "more information."
        )
        events = []
    processor._log_action_on_tracker(tracker, action, events, prediction)
    if any(isinstance(e, UserUttered) for e in events):
        tracker = await processor.run_action_extract_slots(output_channel, tracker)
    if action.name() != ACTION_LISTEN_NAME and not action.name().startswith(UTTER_PREFIX):
        processor._log_slots(tracker)
    await processor.execute_side_effects(events, tracker, output_channel)
    return processor.should_predict_another_action(action.name())


def uninstall() -> None:
    """Puts Rasa's own method back (the equivalence test compares both)."""
    global _INSTALLED
    if not _INSTALLED:
        return
    from rasa.core.processor import MessageProcessor

    MessageProcessor._run_action = _original_run_action  # type: ignore[assignment]
    _INSTALLED = False
