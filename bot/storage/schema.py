"""The tables (SQLAlchemy Core). Changes go through an Alembic migration in ``migrations/``."""
from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

#: One row per conversation. ``id`` is a keyed hash of the channel's sender id,
#: so the raw sender id (which a client could fill with anything) is never stored.
conversations = sa.Table(
    "conversations",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("channel", sa.String(32), nullable=True),
    sa.Column("started_at", sa.Float, nullable=False, index=True),
    sa.Column("last_active", sa.Float, nullable=False, index=True),
    sa.Column("event_count", sa.Integer, nullable=False, default=0),
    sa.Column("turns", sa.Integer, nullable=False, default=0),
    sa.Column("had_crisis", sa.Boolean, nullable=False, default=False, index=True),
    sa.Column("had_fallback", sa.Boolean, nullable=False, default=False, index=True),
    sa.Column("min_confidence", sa.Float, nullable=True),
    sa.Column("topics", sa.Text, nullable=False, default=""),  # ",why_miss,grief," for LIKE filters
    sa.Column("crisis_categories", sa.Text, nullable=False, default=""),
)

#: Every Rasa event of a conversation, redacted. ``data`` is the event as JSON
#: (enough to rebuild the tracker); the other columns are there for the review.
events = sa.Table(
    "events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column(
        "conversation_id",
        sa.String(64),
        sa.ForeignKey("conversations.id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("timestamp", sa.Float, nullable=False),
    sa.Column("intent", sa.String(64), nullable=True),
    sa.Column("confidence", sa.Float, nullable=True),
    sa.Column("action", sa.String(128), nullable=True),
    sa.Column("policy", sa.String(128), nullable=True),
    sa.Column("text", sa.Text, nullable=True),
    sa.Column("data", sa.Text, nullable=False),
    sa.UniqueConstraint("conversation_id", "seq", name="uq_events_conversation_seq"),
    # The latest session start of a conversation (the tracker store reads from there).
    sa.Index("ix_events_conversation_type_seq", "conversation_id", "type", "seq"),
)


#: Advocates and maintainers who may use /review. Passwords are Argon2 hashes.
users = sa.Table(
    "users",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("password_hash", sa.String(255), nullable=False),
    sa.Column("failed_logins", sa.Integer, nullable=False, default=0),
    sa.Column("locked_until", sa.Float, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
)

#: Who looked at which transcript (and other sensitive actions), when.
audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.Float, nullable=False, index=True),
    sa.Column("user_name", sa.String(64), nullable=False),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("conversation_id", sa.String(64), nullable=True),
    sa.Column("detail", sa.Text, nullable=True),
)

#: An advocate's judgement of one turn; exported as example phrases for retraining.
annotations = sa.Table(
    "annotations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("conversation_id", sa.String(64), nullable=False, index=True),
    sa.Column("event_seq", sa.Integer, nullable=False),
    sa.Column("user_name", sa.String(64), nullable=False),
    sa.Column("label", sa.String(32), nullable=False),  # right | wrong_topic | should_be_crisis | harmful
    sa.Column("correct_intent", sa.String(64), nullable=True),
    sa.Column("note", sa.Text, nullable=True),
    sa.Column("text", sa.Text, nullable=True),  # the (redacted) visitor message, kept for the export
    sa.Column("created_at", sa.Float, nullable=False),
)
