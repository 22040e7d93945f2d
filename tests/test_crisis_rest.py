"""Crisis first and always, end to end through the REST channel."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest

from bot.server import rasa_service
from tests.conftest import Chat, customs, free_port, write_endpoints

pytestmark = pytest.mark.slow


def assert_handoff_first(turn: List[Dict[str, Any]], category: str = "") -> Dict[str, Any]:
    kinds = [c.get("type") for c in customs(turn)]
    assert kinds and kinds[0] == "crisis_handoff", kinds
    assert "answer" not in kinds and "fallback" not in kinds
    handoff = customs(turn, "crisis_handoff")[0]
    if category:
        assert handoff["category"] == category
    assert handoff["resources"] and all(r["name"] for r in handoff["resources"])
    assert "1-800-799-7233" in turn[0]["text"] and "88788" in turn[0]["text"]
    assert "cannot access" in turn[0]["text"] or "no tenga acceso" in turn[0]["text"]
    return handoff


def test_danger_as_the_very_first_message(chat: Chat) -> None:
    turn = chat.say("hes outside banging on the door")
    handoff = assert_handoff_first(turn, "imminent_danger")
    assert handoff["resources"][0]["phone"] == "911"
    assert customs(turn, "disclaimer")


def test_suicide_puts_988_first(chat: Chat) -> None:
    handoff = assert_handoff_first(chat.say("i dont want to be here anymore"), "suicide_selfharm")
    assert handoff["resources"][0]["phone"] == "988"


def test_danger_in_the_middle_of_a_conversation(chat: Chat) -> None:
    assert customs(chat.say("why do i miss him"), "answer")
    assert customs(chat.say("what is a trauma bond"), "answer")
    assert_handoff_first(chat.say("he just grabbed a knife"), "weapon")


def test_danger_right_after_a_fallback(chat: Chat) -> None:
    assert customs(chat.say("blorp zxqv"), "fallback")
    assert_handoff_first(chat.say("he hit me an hour ago"), "recent_violence")


def test_after_the_handoff_the_conversation_goes_on_and_hands_off_again(chat: Chat) -> None:
    assert_handoff_first(chat.say("he choked me last night"))
    keep = chat.say("yes")
    assert keep[0]["text"].startswith("I'm here")
    assert customs(chat.say("why do i miss him"), "answer")[0]["topic"] == "why_miss"
    assert_handoff_first(chat.say("hes back and hes got a gun"))


def test_spanish_danger_gets_a_spanish_handoff(chat: Chat) -> None:
    turn = chat.say("me quiere matar")
    handoff = assert_handoff_first(turn, "threat")
    assert handoff["language"] == "es"
    assert "llama al" in turn[0]["text"]


def test_the_core_question_is_not_an_emergency(chat: Chat) -> None:
    kinds = [c["type"] for c in customs(chat.say("why do i miss someone who hurt me"))]
    assert "crisis_handoff" not in kinds


def test_the_region_from_the_widget_chooses_the_numbers(chat: Chat) -> None:
    turn = chat.say("help me now please", metadata={"region": "uk"})
    handoff = assert_handoff_first_uk(turn)
    assert handoff["region"] == "uk"


def assert_handoff_first_uk(turn: List[Dict[str, Any]]) -> Dict[str, Any]:
    handoff = customs(turn, "crisis_handoff")[0]
    assert handoff["resources"][0]["phone"] == "999"
    return handoff


def test_the_handoff_works_with_the_action_server_down(model_path: Path, tmp_path: Path) -> None:
    dead_port = free_port()  # nothing listens here
    endpoints = write_endpoints(tmp_path / "endpoints.yml", dead_port)
    port = free_port()
    server = rasa_service(model_path, port=port, endpoints=str(endpoints), name="rasa-no-actions").start(tmp_path)
    try:
        server.wait_ready()
        chat = Chat(f"http://127.0.0.1:{port}")
        assert_handoff_first(chat.say("he has a gun"), "weapon")
        assert customs(chat.say("why do i miss him"), "answer")
        turn = chat.say("blorp zxqv")  # the fallback needs the action server: a calm reply instead
        assert turn and turn[0].get("text")
        assert_handoff_first(chat.say("i want to kill myself"), "suicide_selfharm")
    finally:
        server.stop()
