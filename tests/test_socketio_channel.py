"""The socket.io channel with a real python-socketio client: payloads arrive intact."""
from __future__ import annotations

import asyncio
from typing import Any, Dict, List

import pytest
import socketio

pytestmark = pytest.mark.slow


async def converse(url: str, messages: List[Any], metadata: Dict[str, Any] = None) -> List[List[Dict[str, Any]]]:
    """Sends each message and collects the bot_uttered events that follow it."""
    client = socketio.AsyncClient()
    received: List[Dict[str, Any]] = []
    confirmed = asyncio.Event()

    @client.on("bot_uttered")
    async def on_bot(data: Dict[str, Any]) -> None:
        received.append(data)

    @client.on("session_confirm")
    async def on_confirm(_: Any) -> None:
        confirmed.set()

    await client.connect(url, socketio_path="/socket.io", transports=["websocket"])
    await client.emit("session_request", {"session_id": None})
    await asyncio.wait_for(confirmed.wait(), 10)
    turns = []
    for message in messages:
        before = len(received)
        payload = message if not isinstance(message, str) else {"message": message, "customData": metadata or {}}
        await client.emit("user_uttered", payload)
        for _ in range(100):  # the turn is complete once a disclaimer or a quiet spell arrives
            await asyncio.sleep(0.1)
            if len(received) > before and _settled(received[before:]):
                break
        await asyncio.sleep(0.3)
        turns.append(received[before:])
    await client.disconnect()
    return turns


def _settled(turn: List[Dict[str, Any]]) -> bool:
    return any("custom" in m for m in turn) and any("text" in m or "error" in m for m in turn)


def kinds(turn: List[Dict[str, Any]]) -> List[str]:
    return [m["custom"]["type"] for m in turn if isinstance(m.get("custom"), dict)]


def test_answers_arrive_with_their_custom_payloads(bot_url: str) -> None:
    [turn] = asyncio.run(converse(bot_url, ["why do i miss him"]))
    assert kinds(turn) == ["answer", "disclaimer"]
    answer = next(m["custom"] for m in turn if m.get("custom", {}).get("type") == "answer")
    assert answer["topic"] == "why_miss" and answer["source"]["publisher"] == "Life After Ours"
    texts = [m for m in turn if m.get("text")]
    assert texts[0]["buttons"][0]["payload"] == "/trauma_bond"


def test_the_crisis_handoff_arrives_first_over_socketio(bot_url: str) -> None:
    greeting, crisis = asyncio.run(converse(bot_url, ["hello", "hes outside banging on the door"]))
    assert "answer" in kinds(greeting)
    assert kinds(crisis)[0] == "crisis_handoff"
    handoff = crisis[1]["custom"]
    assert handoff["category"] == "imminent_danger" and handoff["resources"][0]["phone"] == "911"
    assert "88788" in crisis[0]["text"]


def test_bad_events_get_a_calm_reply_and_the_chat_goes_on(bot_url: str) -> None:
    bad, empty, good = asyncio.run(converse(bot_url, [["not", "a", "dict"], "", "what is a trauma bond"]))
    assert bad and (bad[0].get("error") or bad[0].get("text"))
    assert "fallback" in kinds(empty)
    assert kinds(good)[0] == "answer"


def test_widget_metadata_chooses_the_region(bot_url: str) -> None:
    [turn] = asyncio.run(converse(bot_url, ["please help me now"], metadata={"region": "uk"}))
    assert turn[1]["custom"]["resources"][0]["phone"] == "999"
