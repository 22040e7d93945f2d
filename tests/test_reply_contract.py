"""The reply contract of SPEC.md, through the real REST channel of a running Rasa server."""
from __future__ import annotations

import uuid

import pytest
import requests

from bot.content import TOPIC_IDS, load_content
from tests.conftest import Chat, customs

pytestmark = pytest.mark.slow

TOPIC_QUESTIONS = {
    "why_miss": "why do i miss him so much when he hurt me",
    "trauma_bond": "what is a trauma bond",
    "privacy": "is this chat private",
    "greet": "hello",
    "talk_to_someone": "can i talk to a real person please, its not urgent",
}


def test_the_first_turn_answers_with_source_and_disclaimer(chat: Chat) -> None:
    turn = chat.say("why do i miss him")
    [answer] = customs(turn, "answer")
    assert answer["topic"] == "why_miss"
    assert answer["source"] == {
        "title": "Why Do I Miss Someone Who Hurt Me?",
        "publisher": "Life After Ours",
        "date": "June 2026",
    }
    assert turn[0]["text"] == load_content().topic("why_miss").answer
    [disclaimer] = customs(turn, "disclaimer")
    assert "not a therapist" in disclaimer["text"]
    assert {b["payload"] for b in turn[0]["buttons"]} == {"/trauma_bond", "/still_feel_pull"}


@pytest.mark.parametrize("topic,question", sorted(TOPIC_QUESTIONS.items()))
def test_every_first_turn_carries_the_disclaimer(bot_url: str, topic: str, question: str) -> None:
    turn = Chat(bot_url).say(question)
    assert customs(turn, "disclaimer"), turn
    assert customs(turn, "answer")[0]["topic"] == topic


def test_small_talk_later_has_no_disclaimer_but_article_answers_always_do(chat: Chat) -> None:
    chat.say("hello")
    later_greeting = chat.say("hi again")
    assert customs(later_greeting, "answer")[0] == {"type": "answer", "topic": "greet", "source": None}
    assert not customs(later_greeting, "disclaimer")
    article = chat.say("what is a trauma bond")
    assert customs(article, "answer")[0]["source"]["publisher"] == "Life After Ours"
    assert customs(article, "disclaimer")


@pytest.mark.parametrize("topic", [t for t in TOPIC_IDS])
def test_every_topic_button_answers_its_topic(bot_url: str, topic: str) -> None:
    turn = Chat(bot_url).say(f"/{topic}")
    [answer] = customs(turn, "answer")
    assert answer["topic"] == topic
    store = load_content()
    assert answer["source"] == store.topic(topic).source
    if store.topic(topic).has_article_content:
        assert customs(turn, "disclaimer")


def test_talk_to_someone_lists_resources(chat: Chat) -> None:
    turn = chat.say("/talk_to_someone")
    [resources] = customs(turn, "resources")
    names = [r["name"] for r in resources["resources"]]
    assert "National Domestic Violence Hotline" in names
    hotline = resources["resources"][names.index("National Domestic Violence Hotline")]
    assert hotline["phone"] == "1-800-799-7233" and hotline["sms"] == "88788"


def test_gibberish_gets_a_calm_reply(chat: Chat) -> None:
    turn = chat.say("zxqv blorp wug")
    kinds = [c["type"] for c in customs(turn)]
    assert "fallback" in kinds or "answer" in kinds
    assert "crisis_handoff" not in kinds


def test_an_unclear_message_falls_back_with_the_closest_topics(chat: Chat) -> None:
    turn = chat.say("/nlu_fallback")
    [fallback] = customs(turn, "fallback")
    assert 1 <= len(fallback["suggestions"]) <= 3
    assert set(fallback["suggestions"]) <= set(TOPIC_IDS)
    buttons = [m for m in turn if m.get("buttons")][0]["buttons"]
    assert [b["payload"] for b in buttons] == [f"/{t}" for t in fallback["suggestions"]]
    assert customs(turn, "disclaimer"), "first turn"


def test_out_of_scope_gets_a_kind_redirect(chat: Chat) -> None:
    turn = chat.say("how tall is the eiffel tower")
    topics = [a["topic"] for a in customs(turn, "answer")]
    assert topics == ["out_of_scope"] or customs(turn, "fallback")


@pytest.mark.parametrize(
    "message",
    ["", "   ", "\n\t ", "why " * 2500, "🙂🙂🙂", "¿Dónde está la biblioteca?", "这是什么", "مرحبا كيف حالك"],
    ids=["empty", "spaces", "whitespace", "10000-chars", "emoji", "spanish", "chinese", "arabic"],
)
def test_bad_or_foreign_input_gets_a_calm_reply(bot_url: str, message: str) -> None:
    turn = Chat(bot_url).say(message)
    assert turn and any(m.get("text") for m in turn)
    kinds = {c.get("type") for c in customs(turn)}
    assert kinds & {"fallback", "answer"}, turn
    assert "crisis_handoff" not in kinds


@pytest.mark.parametrize(
    "body",
    ["not json", "null", "[]", '"just a string"', '{"message": "hi"}', '{"sender": 42.5, "message": []}'],
)
def test_malformed_requests_get_a_clear_400(bot_url: str, body: str) -> None:
    response = requests.post(f"{bot_url}/webhooks/rest/webhook", data=body, timeout=30)
    assert response.status_code == 400
    assert response.json()["error"] == "bad_request"
    assert response.json()["message"]


def test_the_conversation_goes_on_after_bad_input(chat: Chat) -> None:
    requests.post(chat.url, data="{broken", timeout=30)
    chat.say("")
    assert customs(chat.say("what is a trauma bond"), "answer")[0]["topic"] == "trauma_bond"


def test_senders_are_kept_apart(bot_url: str) -> None:
    first, second = Chat(bot_url, f"a-{uuid.uuid4().hex}"), Chat(bot_url, f"b-{uuid.uuid4().hex}")
    assert customs(first.say("hello"), "disclaimer")
    assert customs(second.say("hello"), "disclaimer")
    assert not customs(first.say("hello"), "disclaimer")
