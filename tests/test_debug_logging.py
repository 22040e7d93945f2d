"""Debug log values are copied only when debug logging is on."""
from __future__ import annotations

import logging

from bot import debug_logging


def test_copies_only_at_debug_level() -> None:
    debug_logging.install()
    from rasa.core import processor
    from rasa.core.policies.rule_policy import RulePolicy

    value = {"events": [{"event": "bot", "text": "hi"}]}
    rasa_logger = logging.getLogger("rasa")
    before = rasa_logger.level
    try:
        rasa_logger.setLevel(logging.INFO)
        assert processor.copy.deepcopy(value) is value
        assert RulePolicy.format_tracker_states([{"prev_action": {"action_name": "action_listen"}}]) == ""
        rasa_logger.setLevel(logging.DEBUG)
        copied = processor.copy.deepcopy(value)
        assert copied == value and copied is not value
        assert "action_listen" in RulePolicy.format_tracker_states([{"prev_action": {"action_name": "action_listen"}}])
    finally:
        rasa_logger.setLevel(before)
