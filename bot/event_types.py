"""Rasa finds an event's class by walking its whole class tree, for every event it reads: a dictionary instead.

``Event.resolve_by_type`` (used whenever events are read from JSON: the
tracker store, the HTTP API, the action server's answers) lists every
subclass of ``Event`` and compares type names, about 40 microseconds an
event; reading a conversation of a few hundred events took milliseconds.
Here each type name is looked up the slow way once and then remembered.
Unknown names behave as before (the default, or Rasa's ValueError).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Type

_INSTALLED = False


def install() -> None:
    global _INSTALLED
    if _INSTALLED:
        return
    from rasa.shared.core.events import Event

    original = Event.resolve_by_type
    known: Dict[str, Type[Any]] = {}

    def resolve_by_type(type_name: str, default: Optional[Type[Any]] = None) -> Optional[Type[Any]]:
        found = known.get(type_name)
        if found is not None:
            return found
        found = original(type_name, default)
        if found is not None and getattr(found, "type_name", None) == type_name:
            known[type_name] = found
        return found

    Event.resolve_by_type = staticmethod(resolve_by_type)  # type: ignore[assignment]
    _INSTALLED = True
