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
_IMMUTABLE = (int, float, bool, type(None))


def copy_noting_braces(value: Any) -> Tuple[Any, bool]:
    """A deep copy of YAML/JSON-like data (faster than ``copy.deepcopy`` for it), and whether
    some string in it holds "{" or "}": only then can Rasa's interpolation change it.

    Anything else is deep-copied and counted as possibly holding a placeholder.
    """
    kind = type(value)
    if kind is str:
        return value, "{" in value or "}" in value
    if kind is dict:
        out, braces = {}, False
        for key, item in value.items():
            out[key], found = copy_noting_braces(item)
            braces = braces or found
        return out, braces
    if kind is list:
        items = [copy_noting_braces(item) for item in value]
        return [item for item, _ in items], any(found for _, found in items)
    if kind in _IMMUTABLE:
        return value, False
    return copy.deepcopy(value), True


def plain_copy(value: Any) -> Any:
    """A deep copy of YAML/JSON-like data, faster than ``copy.deepcopy`` for it."""
    return copy_noting_braces(value)[0]


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
        response, braces = copy_noting_braces(chosen)
        return self._fill_response(response, filled_slots, **kwargs) if braces else response

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
