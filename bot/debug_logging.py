"""Rasa builds its debug log lines even when debug logging is off: not any more.

Rasa 3.6's message processor and RulePolicy deep-copy events, slot values
and parse data, and format the dialogue states, for structlog ``debug``
calls, on every message and every prediction, whatever the log level. When
the ``rasa`` logger is not at DEBUG these copies are thrown away unread, so
here they are skipped: the values are passed as they are (nothing renders
them) and the states are not formatted. At DEBUG everything is as before.
"""
from __future__ import annotations

import copy as _copy
import logging
import types
from typing import Any

_INSTALLED = False
_RASA = logging.getLogger("rasa")


def debugging() -> bool:
    return _RASA.isEnabledFor(logging.DEBUG)


def _deepcopy_if_debugging(value: Any, memo: Any = None) -> Any:
    return _copy.deepcopy(value, memo) if debugging() else value


def install() -> None:
    """Patches the two Rasa modules whose ``copy.deepcopy`` calls only feed debug logs (checked for 3.6)."""
    global _INSTALLED
    if _INSTALLED:
        return
    from rasa.core import processor
    from rasa.core.policies import rule_policy

    shim = types.SimpleNamespace(deepcopy=_deepcopy_if_debugging, copy=_copy.copy)
    processor.copy = shim  # type: ignore[assignment]
    rule_policy.copy = shim  # type: ignore[assignment]
    original = rule_policy.RulePolicy.format_tracker_states

    def format_tracker_states(states: Any) -> str:
        return original(states) if debugging() else ""

    rule_policy.RulePolicy.format_tracker_states = staticmethod(format_tracker_states)  # type: ignore[assignment]
    _INSTALLED = True
