"""Rasa serialises the whole domain for every message to learn whether it is empty: learnt once.

Before it checks a parsed message's intent and entities against the domain,
Rasa 3.6 compares ``domain.as_dict()`` (every response, slot and form) with
an empty domain's, half a millisecond per message for this bot's domain.
A loaded model's domain does not change, so the answer is kept with it.
"""
from __future__ import annotations

from typing import Any

_INSTALLED = False
_ATTRIBUTE = "_bot_is_empty"


def install() -> None:
    global _INSTALLED
    if _INSTALLED:
        return
    from rasa.shared.core.domain import Domain

    original = Domain.is_empty

    def is_empty(self: Domain) -> bool:
        known: Any = self.__dict__.get(_ATTRIBUTE)
        if known is None:
            known = self.__dict__[_ATTRIBUTE] = original(self)
        return known

    Domain.is_empty = is_empty  # type: ignore[assignment]
    _INSTALLED = True
