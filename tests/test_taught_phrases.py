"""Example phrases are answered as taught: word for word, the bot is sure of their intent.

Through Rasa's own parse endpoint of the running server (with the API
token), for the project's trained model, and for the lookup's rules alone.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import pytest
import requests
import yaml

from rasa.shared.nlu.training_data.message import Message

from bot.keys import api_token
from bot.nlu.classifier import taught_key, taught_phrases
from tests.conftest import PROJECT


def _examples() -> List[Tuple[str, str]]:
    """(phrase, intent) for every example phrase in data/nlu."""
    pairs = []
    for path in sorted((PROJECT / "data" / "nlu").glob("*.yml")):
        for block in yaml.safe_load(path.read_text(encoding="utf-8"))["nlu"]:
            if "intent" in block:
                pairs += [(line[2:].strip(), block["intent"]) for line in block["examples"].splitlines() if line.startswith("- ")]
    return pairs


def _parse(bot_url: str, text: str) -> Dict:
    response = requests.post(f"{bot_url}/model/parse", params={"token": api_token()}, json={"text": text}, timeout=60)
    assert response.status_code == 200, response.text[:300]
    return response.json()


def test_the_key_ignores_case_spaces_and_end_punctuation() -> None:
    assert taught_key("  Hi   there!! ") == taught_key("hi there") == "hi there"
    assert taught_key("why?") == "why"
    assert taught_key("why not") != taught_key("why")
    assert taught_key("") == ""


def test_a_phrase_taught_for_two_intents_is_left_to_the_models() -> None:
    examples = [Message({"text": "ok", "intent": "affirm"}), Message({"text": "OK!", "intent": "thanks"}),
                Message({"text": "hello", "intent": "greet"}), Message({"text": "Hello", "intent": "greet"})]
    assert taught_phrases(examples) == {"hello": "greet"}


@pytest.mark.slow
def test_every_fifth_example_phrase_gets_its_intent_with_full_confidence(bot_url: str) -> None:
    from bot.danger import load_detector

    detector = load_detector()  # the danger rules come first: a phrase they catch is a crisis
    pairs = _examples()
    by_key: Dict[str, set] = {}
    for text, intent in pairs:
        by_key.setdefault(taught_key(text), set()).add(intent)
    sample = [(t, i) for t, i in pairs[::5] if len(by_key[taught_key(t)]) == 1]
    assert len(sample) > 100
    wrong = []
    for text, intent in sample:
        parsed = _parse(bot_url, text)["intent"]
        expected = "crisis" if detector.detect(text) is not None else intent
        if parsed["name"] != expected or parsed["confidence"] != 1.0:
            wrong.append((text, intent, parsed))
    assert not wrong, wrong[:5]


@pytest.mark.slow
def test_a_taught_phrase_in_other_case_and_punctuation_is_still_known(bot_url: str) -> None:
    assert ("hi", "greet") in _examples()
    parsed = _parse(bot_url, "  HI!! ")
    assert parsed["intent"] == {"name": "greet", "confidence": 1.0}
    assert parsed["intent_ranking"][0]["name"] == "greet"
    assert len(parsed["intent_ranking"]) > 1  # the other intents keep their ranking for suggestions


@pytest.mark.slow
def test_a_message_that_was_not_taught_is_left_to_the_models(bot_url: str) -> None:
    text = "hi, could you tell me whether missing him this much is normal"
    assert taught_key(text) not in {taught_key(t) for t, _ in _examples()}
    assert _parse(bot_url, text)["intent"]["confidence"] < 1.0
