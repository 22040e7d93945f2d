"""The danger detector: recognises messages that need the crisis handoff.

``patterns`` reads the advocate-editable rules in ``data/danger/``;
``normalise`` turns what visitors type (kms, hes, choaked) into canonical
words; ``detector`` matches the rules with spaCy's Matcher and decides,
with tense and negation context, whether a message is a crisis.
"""
from bot.danger.detector import Detection, DangerDetector, load_detector

__all__ = ["Detection", "DangerDetector", "load_detector"]
