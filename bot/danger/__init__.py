"""The danger detector: recognises messages that need the crisis handoff.

``patterns`` reads the advocate-editable rules in ``data/danger/``;
``normalise`` turns what visitors type (kms, hes, choaked) into canonical
words; ``detector`` matches the rules with spaCy's Matcher and decides,
with tense and negation context, whether a message is a crisis.

(spaCy is imported only when a detector is built, so reading the rules, as
the flow book does, stays light.)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from bot.danger.detector import DangerDetector, Detection  # noqa: F401


def load_detector(*args: Any, **kwargs: Any) -> "DangerDetector":
    """The detector for ``data/danger``, built once per process (see ``bot.danger.detector``)."""
    from bot.danger.detector import load_detector as _load

    return _load(*args, **kwargs)
