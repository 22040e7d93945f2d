"""Event classes found by name from a dictionary: the same classes Rasa's walk finds."""
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
