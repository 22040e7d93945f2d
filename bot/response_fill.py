"""Rasa fills every response with the slots through ``copy.deepcopy``: a plain copy instead.

For every response it sends, Rasa 3.6's templated generator deep-copies the
response from the domain and then runs the slot interpolation over every
string in it. This bot's answers carry a source, a disclaimer and buttons,
and only a few responses have a ``{placeholder}``: the deep copy and the
interpolation were about 4 % of a message's time. Responses are plain YAML
data (dicts, lists, strings, numbers), so this copies dicts and lists and
keeps the immutable rest, and it interpolates only responses that have a
brace in some string, which is the only case where Rasa's interpolation
changes anything. Anything that is not plain data is deep-copied as before.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, Optional, Text, Tuple

_INSTALLED = False
_original: Any = None
_IMMUTABLE = (str, int, float, bool, type(None))
# id(response in the domain) -> (that response, whether a string in it has a brace)
_has_braces: Dict[int, Tuple[Any, bool]] = {}


def plain_copy(value: Any) -> Any:
    """A deep copy of YAML/JSON-like data, faster than ``copy.deepcopy`` for it."""
    kind = type(value)
    if kind is dict:
        return {k: plain_copy(v) for k, v in value.items()}
    if kind is list:
        return [plain_copy(v) for v in value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)


def has_braces(value: Any) -> bool:
    """True when some string in ``value`` holds "{" or "}" (Rasa's interpolation may change it)."""
    if isinstance(value, str):
        return "{" in value or "}" in value
    if isinstance(value, dict):
        return any(has_braces(v) for v in value.values())
    if isinstance(value, list):
        return any(has_braces(v) for v in value)
    return False


def _needs_filling(response: Any) -> bool:
    known = _has_braces.get(id(response))
    if known is not None and known[0] is response:
        return known[1]
    answer = has_braces(response)
    if len(_has_braces) > 10_000:  # a domain has far fewer responses: something else is passing dicts
        _has_braces.clear()
    _has_braces[id(response)] = (response, answer)
    return answer


def install() -> None:
    """Replaces ``TemplatedNaturalLanguageGenerator.generate_from_slots`` once per process."""
    global _INSTALLED, _original
    if _INSTALLED:
        return
    from rasa.core.nlg.response import TemplatedNaturalLanguageGenerator

    _original = TemplatedNaturalLanguageGenerator.generate_from_slots

    def generate_from_slots(
        self: TemplatedNaturalLanguageGenerator,
        utter_action: Text,
        filled_slots: Dict[Text, Any],
        output_channel: Text,
        **kwargs: Any,
    ) -> Optional[Dict[Text, Any]]:
        chosen = self._random_response_for(utter_action, output_channel, filled_slots)
        if chosen is None:
            return None
        response = plain_copy(chosen)
        if _needs_filling(chosen):
            return self._fill_response(response, filled_slots, **kwargs)
        return response

    TemplatedNaturalLanguageGenerator.generate_from_slots = generate_from_slots  # type: ignore[assignment]
    _INSTALLED = True


def uninstall() -> None:
    """Puts Rasa's own method back (for the tests that compare both)."""
    global _INSTALLED
    if not _INSTALLED:
        return
    from rasa.core.nlg.response import TemplatedNaturalLanguageGenerator

    TemplatedNaturalLanguageGenerator.generate_from_slots = _original  # type: ignore[assignment]
    _INSTALLED = False
