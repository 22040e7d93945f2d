"""An index to find a conversation's latest session start without reading all its events.

The tracker store hands Rasa only the current session (as Rasa's own SQL
tracker store does), so reading a conversation starts with the seq of its
latest ``session_started`` event.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_events_conversation_type_seq", "events", ["conversation_id", "type", "seq"])


def downgrade() -> None:
    op.drop_index("ix_events_conversation_type_seq", table_name="events")
