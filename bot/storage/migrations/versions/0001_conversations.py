"""Conversations and their redacted events.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("channel", sa.String(32), nullable=True),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("last_active", sa.Float, nullable=False),
        sa.Column("event_count", sa.Integer, nullable=False, server_default="0"),
        sa.Column("turns", sa.Integer, nullable=False, server_default="0"),
        sa.Column("had_crisis", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("had_fallback", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("min_confidence", sa.Float, nullable=True),
        sa.Column("topics", sa.Text, nullable=False, server_default=""),
        sa.Column("crisis_categories", sa.Text, nullable=False, server_default=""),
    )
    op.create_index("ix_conversations_started_at", "conversations", ["started_at"])
    op.create_index("ix_conversations_last_active", "conversations", ["last_active"])
    op.create_index("ix_conversations_had_crisis", "conversations", ["had_crisis"])
    op.create_index("ix_conversations_had_fallback", "conversations", ["had_fallback"])
    op.create_table(
        "events",
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
    )


def downgrade() -> None:
    op.drop_table("events")
    op.drop_table("conversations")
