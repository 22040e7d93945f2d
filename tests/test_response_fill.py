"""Responses copied as plain data and filled only when they have a placeholder: the same replies as Rasa's."""
from __future__ import annotations

import asyncio
import copy
from typing import Any, Dict, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rasa.core.nlg.response import TemplatedNaturalLanguageGenerator
from rasa.shared.core.domain import Domain

from bot import response_fill
from bot.paths import project_dir

PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


@given(PLAIN)
@settings(max_examples=300, deadline=None)
def test_plain_copy_equals_a_deep_copy_and_shares_no_container(value: Any) -> None:
    copied = response_fill.plain_copy(value)
    assert copied == copy.deepcopy(value)

    def containers(v: Any) -> List[int]:
        if isinstance(v, dict):
            return [id(v)] + [i for x in v.values() for i in containers(x)]
        if isinstance(v, list):
            return [id(v)] + [i for x in v for i in containers(x)]
        return []

    assert not set(containers(copied)) & set(containers(value))


def test_other_objects_are_still_deep_copied() -> None:
    class Thing:
        def __init__(self) -> None:
            self.items = [1]

    thing = Thing()
    copied = response_fill.plain_copy({"x": thing})["x"]
    assert copied is not thing and copied.items == [1] and copied.items is not thing.items


def _generate_all(nlg: TemplatedNaturalLanguageGenerator, slots: Dict[str, Any]) -> Dict[str, Any]:
    out = {}
    for name in nlg.responses:
        for channel in ("rest", "socketio", ""):
            out[(name, channel)] = asyncio.run(_one(nlg, name, slots, channel))
    return out


async def _one(nlg: TemplatedNaturalLanguageGenerator, name: str, slots: Dict[str, Any], channel: str) -> Any:
    return nlg.generate_from_slots(name, slots, channel)


@pytest.mark.parametrize("extra", [{}, {"region": "us", "ignored": "{not a slot}"}])
def test_every_response_of_the_domain_is_what_rasa_generates(extra: Dict[str, Any]) -> None:
    domain = Domain.load(str(project_dir() / "domain"))
    slots = {slot.name: slot.initial_value for slot in domain.slots}
    slots.update(extra)
    placeholder = {"utter_test_placeholder": [{"text": "In {region} call {missing_slot}", "custom": {"x": "{region}"}}]}
    # Every variant on its own (Rasa picks one of several at random).
    responses = {f"{name}#{i}": [variant] for name, variants in {**domain.responses, **placeholder}.items()
                 for i, variant in enumerate(variants)}
    response_fill.uninstall()
    try:
        rasa = _generate_all(TemplatedNaturalLanguageGenerator(responses), slots)
    finally:
        response_fill.install()
    nlg = TemplatedNaturalLanguageGenerator(responses)
    ours = _generate_all(nlg, slots)
    assert len(ours) == 3 * len(responses) > 3 * 40 and ours == rasa
    if extra:
        assert ours[("utter_test_placeholder#0", "rest")]["custom"] == {"x": "us"}
    # The domain's responses are left as they were.
    again = _generate_all(nlg, slots)
    for key in ours:
        if ours[key] is not None:
            ours[key]["mutated"] = True
    assert _generate_all(nlg, slots) == again and all("mutated" not in (v or {}) for v in again.values())
