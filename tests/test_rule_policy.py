"""bot.policy.RulePolicy predicts exactly what Rasa's RulePolicy predicts, only faster.

Both are trained on the project's rules; generated conversations (any intent
in any order, slots, rewinds, restarts, new sessions, copied trackers) are
played through both, and every prediction must be identical.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rasa.core.policies.rule_policy import RulePolicy as RasaRulePolicy
from rasa.engine.graph import ExecutionContext, GraphSchema
from rasa.engine.storage.local_model_storage import LocalModelStorage
from rasa.engine.storage.resource import Resource
from rasa.shared.core.constants import ACTION_LISTEN_NAME, ACTION_SESSION_START_NAME
from rasa.shared.core.domain import Domain
from rasa.shared.core.events import (
    ActionExecuted,
    ActionReverted,
    BotUttered,
    Restarted,
    SessionStarted,
    SlotSet,
    UserUttered,
    UserUtteranceReverted,
)
from rasa.shared.core.generator import TrainingDataGenerator
from rasa.shared.core.trackers import DialogueStateTracker
from rasa.shared.importers.importer import TrainingDataImporter

from bot import policy as fast_policy
from tests.conftest import PROJECT


def _policy_config() -> Dict[str, Any]:
    config = yaml.safe_load((PROJECT / "config.yml").read_text())
    entry = next(p for p in config["policies"] if p["name"].endswith("RulePolicy"))
    return {k: v for k, v in entry.items() if k != "name"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Domain, RasaRulePolicy, fast_policy.RulePolicy]:
    importer = TrainingDataImporter.load_from_config(
        str(PROJECT / "config.yml"), str(PROJECT / "domain"), [str(PROJECT / "data" / "nlu"), str(PROJECT / "data" / "rules")]
    )
    domain = importer.get_domain()
    trackers = TrainingDataGenerator(importer.get_stories(), domain, augmentation_factor=0, use_story_concatenation=False).generate()
    storage = LocalModelStorage(Path(tmp_path_factory.mktemp("policies")))
    context = ExecutionContext(GraphSchema({}), "test")
    stock = RasaRulePolicy.create({**RasaRulePolicy.get_default_config(), **_policy_config()}, storage, Resource("stock"), context)
    stock.train(trackers, domain)
    fast = fast_policy.RulePolicy.create({**RasaRulePolicy.get_default_config(), **_policy_config()}, storage, Resource("fast"), context)
    fast.train(trackers, domain)
    return domain, stock, fast


def test_training_gives_the_same_rules(trained) -> None:
    _, stock, fast = trained
    assert fast.lookup == stock.lookup
    assert fast.lookup["rules"], "no rules were learned"


def _new_tracker(domain: Domain, sender: str) -> DialogueStateTracker:
    tracker = DialogueStateTracker(sender, domain.slots)
    for event in (ActionExecuted(ACTION_SESSION_START_NAME), SessionStarted(), ActionExecuted(ACTION_LISTEN_NAME)):
        tracker.update(event, domain)
    return tracker


def _same(a: Any, b: Any) -> bool:
    return (
        a.probabilities == b.probabilities
        and a.policy_name == b.policy_name
        and a.events == b.events
        and a.is_end_to_end_prediction == b.is_end_to_end_prediction
        and a.is_no_user_prediction == b.is_no_user_prediction
        and a.hide_rule_turn == b.hide_rule_turn
    )


def play(domain: Domain, stock: RasaRulePolicy, fast: fast_policy.RulePolicy, steps: List[Tuple[str, str]]) -> int:
    """Plays ``steps`` through both policies; returns how many predictions were compared."""
    tracker = _new_tracker(domain, "generated")
    compared = 0
    for kind, value in steps:
        if kind == "user":
            tracker.update(UserUttered(f"message for {value}", intent={"name": value, "confidence": 0.9}), domain)
        elif kind == "slot":
            tracker.update(SlotSet("region", value), domain)
            continue
        elif kind == "rewind":
            tracker.update(UserUtteranceReverted(), domain)
            continue
        elif kind == "undo":
            tracker.update(ActionReverted(), domain)
            continue
        elif kind == "restart":
            tracker.update(Restarted(), domain)
            tracker.update(ActionExecuted(ACTION_LISTEN_NAME), domain)
            continue
        elif kind == "session":
            for event in (ActionExecuted(ACTION_SESSION_START_NAME), SessionStarted(), ActionExecuted(ACTION_LISTEN_NAME)):
                tracker.update(event, domain)
            continue
        elif kind == "copy":
            tracker = tracker.copy()
            continue
        for _ in range(8):
            expected = stock.predict_action_probabilities(tracker, domain)
            got = fast.predict_action_probabilities(tracker, domain)
            compared += 1
            assert _same(expected, got), (
                f"after {[e.as_dict().get('name') or e.as_dict().get('event') for e in tracker.events]}: "
                f"Rasa {expected.probabilities.index(expected.max_confidence)} vs bot {got.probabilities.index(got.max_confidence)}"
            )
            action = domain.action_names_or_texts[expected.probabilities.index(expected.max_confidence)]
            tracker.update(ActionExecuted(action, expected.policy_name, expected.max_confidence), domain)
            if action == ACTION_LISTEN_NAME:
                break
            tracker.update(BotUttered(f"said by {action}"), domain)
    return compared


def _steps(domain: Domain):
    intents = sorted(set(domain.intents) | {"nlu_fallback"})
    return st.lists(
        st.one_of(
            st.tuples(st.just("user"), st.sampled_from(intents)),
            st.tuples(st.just("user"), st.sampled_from(["crisis", "affirm", "why_miss", "greet"])),
            st.tuples(st.sampled_from(["slot"]), st.sampled_from(["us", "uk"])),
            st.tuples(st.sampled_from(["rewind", "undo", "restart", "session", "copy"]), st.just("")),
        ),
        max_size=14,
    )


def test_generated_conversations_get_the_same_predictions(trained) -> None:
    domain, stock, fast = trained
    total = {"n": 0}

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(steps=_steps(domain))
    def check(steps: List[Tuple[str, str]]) -> None:
        total["n"] += play(domain, stock, fast, steps)

    check()
    assert total["n"] > 500


def test_a_long_conversation_with_sessions_gets_the_same_predictions(trained) -> None:
    domain, stock, fast = trained
    topics = ["greet", "why_miss", "crisis", "affirm", "grief", "nlu_fallback", "thanks", "deny", "privacy"]
    steps = [("user", topics[i % len(topics)]) for i in range(90)]
    steps[40:40] = [("session", "")]
    steps[70:70] = [("copy", ""), ("rewind", ""), ("restart", "")]
    assert play(domain, stock, fast, steps) > 200


def test_the_answer_costs_the_same_late_in_a_conversation(trained) -> None:
    """The point of the cache: the 300th message is predicted as fast as the 3rd."""
    from bot import debug_logging

    debug_logging.install()  # as in the server: no debug log lines built for nobody
    domain, _, fast = trained
    tracker = _new_tracker(domain, "long")

    def turn(intent: str) -> float:
        tracker.update(UserUttered("x", intent={"name": intent, "confidence": 0.9}), domain)
        start = time.perf_counter()
        for _ in range(4):
            prediction = fast.predict_action_probabilities(tracker, domain)
            action = domain.action_names_or_texts[prediction.probabilities.index(prediction.max_confidence)]
            tracker.update(ActionExecuted(action, prediction.policy_name, prediction.max_confidence), domain)
            if action == ACTION_LISTEN_NAME:
                break
        return time.perf_counter() - start

    early = sorted(turn("why_miss") for _ in range(20))[10]
    for _ in range(300):
        turn("grief")
    late = sorted(turn("why_miss") for _ in range(20))[10]
    assert late < max(3 * early, 0.002), (early, late)
