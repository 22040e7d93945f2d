"""Exports advocates' annotations as example phrases for retraining (CSV or YAML)."""
from __future__ import annotations

import csv
import io
import re
from typing import Dict, List, Optional

import sqlalchemy as sa
import yaml

from bot.storage import db
from bot.storage.schema import annotations, events

#: Redaction placeholders become plain words, so the phrase still trains well.
PLACEHOLDER_WORDS = {
    "[NAME]": "someone",
    "[PHONE]": "a number",
    "[EMAIL]": "an email",
    "[ADDRESS]": "an address",
    "[ZIP]": "a zip code",
    "[URL]": "a link",
    "[IP]": "an address",
    "[DATE]": "a date",
    "[CARD]": "a card",
    "[SSN]": "a number",
}


def plain_phrase(text: str) -> str:
    for placeholder, word in PLACEHOLDER_WORDS.items():
        text = text.replace(placeholder, word)
    return re.sub(r"\s+", " ", text).strip()


def corrections(url: Optional[str] = None, include_right: bool = False) -> List[Dict[str, str]]:
    """One row per annotated turn: the intent it should have had and the (redacted) text."""
    db.migrate(url)
    labels = ["wrong_topic", "should_be_crisis"] + (["right"] if include_right else [])
    with db.engine(url).connect() as connection:
        rows = connection.execute(
            sa.select(annotations.c.label, annotations.c.correct_intent, annotations.c.text, events.c.intent)
            .select_from(
                annotations.outerjoin(
                    events,
                    sa.and_(events.c.conversation_id == annotations.c.conversation_id, events.c.seq == annotations.c.event_seq),
                )
            )
            .where(annotations.c.label.in_(labels))
            .order_by(annotations.c.created_at)
        ).all()
    out: List[Dict[str, str]] = []
    seen = set()
    for label, correct, text, predicted in rows:
        intent = correct if label != "right" else predicted
        phrase = plain_phrase(text or "")
        if intent and phrase and (intent, phrase.lower()) not in seen:
            seen.add((intent, phrase.lower()))
            out.append({"intent": intent, "text": phrase})
    return out


def to_csv(rows: List[Dict[str, str]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=["intent", "text"])
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def to_yaml(rows: List[Dict[str, str]]) -> str:
    return yaml.safe_dump({"phrases": rows}, allow_unicode=True, sort_keys=False)
