"""Skipping Rasa's per-action copy of the conversation changes nothing but the time it takes."""
from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import bot.channels  # noqa: F401  (installs the project's patches, as every server does)
from bot import turns

pytestmark = pytest.mark.slow

CONVERSATION = ["hi", "why do i miss him", "/trauma_bond", "zxqv blorp", "he has a gun", "yes", "thank you",
                "i still think about going back to her", "¿por qué lo extraño?", "", "/restart", "bye"]
VOLATILE = ("timestamp", "message_id")


def _comparable(event: Dict[str, Any]) -> Dict[str, Any]:
    event = {k: v for k, v in event.items() if k not in VOLATILE}
    if isinstance(event.get("parse_data"), dict):
        event["parse_data"] = {k: v for k, v in event["parse_data"].items() if k not in VOLATILE}
    return event


async def _play(agent: Any, sender: str) -> Tuple[List[Dict[str, Any]], List[Any], int]:
    from rasa.core.channels.channel import CollectingOutputChannel, UserMessage
    from rasa.shared.core.trackers import DialogueStateTracker

    copies = {"n": 0}
    original = DialogueStateTracker.travel_back_in_time

    def counted(self: DialogueStateTracker, *args: Any, **kwargs: Any) -> Any:
        copies["n"] += 1
        return original(self, *args, **kwargs)

    DialogueStateTracker.travel_back_in_time = counted  # type: ignore[assignment]
    replies = []
    try:
        for text in CONVERSATION:
            out = CollectingOutputChannel()
            await agent.handle_message(UserMessage(text, out, sender))
            replies.append([{k: v for k, v in m.items() if k != "recipient_id"} for m in out.messages])
    finally:
        DialogueStateTracker.travel_back_in_time = original  # type: ignore[assignment]
    tracker = await agent.tracker_store.retrieve(sender)
    return [_comparable(e.as_dict()) for e in tracker.events], replies, copies["n"]


def test_the_same_events_and_replies_as_with_rasas_copies(model_path: Path) -> None:
    from rasa.core.agent import load_agent
    from rasa.core.tracker_store import InMemoryTrackerStore
    from rasa.core.utils import AvailableEndpoints

    async def compare() -> None:
        agent = await load_agent(model_path=str(model_path), endpoints=AvailableEndpoints())
        agent.tracker_store = agent.processor.tracker_store = InMemoryTrackerStore(agent.domain)
        ours = await _play(agent, f"ours-{uuid.uuid4().hex}")
        turns.uninstall()
        try:
            theirs = await _play(agent, f"rasa-{uuid.uuid4().hex}")
        finally:
            turns.install()
        assert ours[1] == theirs[1], "the visitor saw different replies"
        assert ours[0] == theirs[0], "the conversation's events differ"
        assert ours[2] < theirs[2] / 3, f"copies: {ours[2]} with the patch, {theirs[2]} without"

    asyncio.run(compare())
