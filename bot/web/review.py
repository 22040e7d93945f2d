"""The advocates' review (/review): overview, conversations, transcripts, annotations, audit log."""
from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from flask import Blueprint, abort, flash, g, redirect, render_template, request, url_for

from bot.content import TOPIC_IDS
from bot.storage.schema import annotations, audit_log, conversations, events
from bot.web import transcripts
from bot.web.auth import login_required, maintainer_required
from bot.web.database import audit, connection

bp = Blueprint("review", __name__, url_prefix="/review")

LABELS = {
    "right": "Right",
    "wrong_topic": "Wrong topic",
    "should_be_crisis": "Should have been a crisis handoff",
    "harmful": "Harmful or unsafe",
}
INTENTS = [*TOPIC_IDS, "crisis"]


@bp.route("/")
@login_required
def overview() -> Any:
    data = transcripts.overview(connection())
    chart = transcripts.bar_chart(data["per_day"], ["conversations", "handoffs", "fallbacks"])
    return render_template("review/overview.html", data=data, chart=chart)


@bp.route("/conversations")
@login_required
def conversation_list() -> Any:
    filters = transcripts.Filters.from_args(request.args)
    rows, total = transcripts.list_conversations(connection(), filters)
    pages = max(1, -(-total // transcripts.PAGE_SIZE))
    return render_template(
        "review/conversations.html", rows=rows, total=total, filters=filters, pages=pages, topics=TOPIC_IDS
    )


@bp.route("/conversations/<conversation_id>")
@login_required
def conversation(conversation_id: str) -> Any:
    if not conversation_id.isalnum() or len(conversation_id) > 64:
        abort(404)
    data = transcripts.transcript(connection(), conversation_id)
    if data is None:
        abort(404)
    audit("view_transcript", conversation_id)
    return render_template("review/transcript.html", data=data, labels=LABELS, intents=INTENTS)


@bp.route("/conversations/<conversation_id>/annotate", methods=("POST",))
@login_required
def annotate(conversation_id: str) -> Any:
    label = request.form.get("label", "")
    correct = request.form.get("correct_intent") or None
    note = (request.form.get("note") or "").strip()[:2000] or None
    try:
        seq = int(request.form.get("seq", ""))
    except ValueError:
        abort(400, description="Which turn? The form is missing the turn number.")
    if label not in LABELS:
        abort(400, description="Pick one of the labels.")
    if label == "wrong_topic" and correct not in INTENTS:
        abort(400, description="Pick the topic the visitor was asking about.")
    if label == "should_be_crisis":
        correct = "crisis"
    conn = connection()
    text = conn.execute(
        sa.select(events.c.text).where(
            events.c.conversation_id == conversation_id, events.c.seq == seq, events.c.type == "user"
        )
    ).scalar()
    if text is None:
        abort(404)
    conn.execute(
        sa.insert(annotations).values(
            conversation_id=conversation_id,
            event_seq=seq,
            user_name=g.user.name,
            label=label,
            correct_intent=correct if label in ("wrong_topic", "should_be_crisis") else None,
            note=note,
            text=text,
            created_at=time.time(),
        )
    )
    conn.commit()
    audit("annotate", conversation_id, f"{label} on turn {seq}")
    flash("Thank you: your note on this turn is saved.")
    return redirect(url_for("review.conversation", conversation_id=conversation_id) + f"#turn-{seq}")


@bp.route("/audit")
@maintainer_required
def audit_page() -> Any:
    rows = connection().execute(sa.select(audit_log).order_by(audit_log.c.at.desc()).limit(500)).mappings().all()
    return render_template("review/audit.html", rows=rows)


@bp.app_template_filter("when")
def when(timestamp: Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.gmtime(float(timestamp))) + " UTC"
    except (TypeError, ValueError):
        return "-"


@bp.app_template_filter("percent")
def percent(value: Any) -> str:
    try:
        return f"{100 * float(value):.0f} %"
    except (TypeError, ValueError):
        return "-"


@bp.app_template_filter("without_page")
def without_page(args: dict) -> dict:
    return {k: v for k, v in args.items() if k != "page"}
