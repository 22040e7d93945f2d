"""Rasa's per-message lookups, remembered (event classes by name, whether the domain is empty): the same answers."""
from __future__ import annotations

import pytest

import rasa.shared.utils.common
from rasa.shared.core.events import ActionExecuted, Event, SessionStarted, UserUttered

from bot import event_types


def _walk(type_name: str):
    return next((c for c in rasa.shared.utils.common.all_subclasses(Event) if c.type_name == type_name), None)


def test_every_event_type_resolves_to_the_class_rasa_finds() -> None:
    event_types.install()
    names = {c.type_name for c in rasa.shared.utils.common.all_subclasses(Event)}
    assert {"user", "action", "session_started", "slot", "bot"} <= names
    for _ in range(2):  # first from the walk, then from the dictionary
        for name in names:
            assert Event.resolve_by_type(name) is _walk(name), name


def test_unknown_names_behave_as_before() -> None:
    event_types.install()
    assert Event.resolve_by_type("no_such_event", default=UserUttered) is UserUttered
    assert Event.resolve_by_type("topic") is None
    with pytest.raises(ValueError):
        Event.resolve_by_type("no_such_event")
    # An unknown name resolved with a default is not remembered as that default.
    assert Event.resolve_by_type("no_such_event", default=ActionExecuted) is ActionExecuted


def test_events_read_from_json_are_the_same() -> None:
    event_types.install()
    events = [SessionStarted(), ActionExecuted("action_listen"), UserUttered("hi", {"name": "greet", "confidence": 1.0})]
    assert [Event.from_parameters(e.as_dict()) for e in events] == events


def test_a_domain_is_asked_once_whether_it_is_empty() -> None:
    from rasa.shared.core.domain import Domain

    from bot import domain_cache
    from tests.conftest import PROJECT

    domain_cache.install()
    assert Domain.empty().is_empty()
    domain = Domain.load(str(PROJECT / "domain"))
    assert not domain.is_empty() and not domain.is_empty()
    assert domain.__dict__["_bot_is_empty"] is False
