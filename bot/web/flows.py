"""The flow book pages (/review/flows), built from the data files on every request."""
from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, render_template

from bot.content import TOPIC_IDS
from bot.flowbook import build_flowbook, rules_diagram
from bot.web.auth import login_required

bp = Blueprint("flows", __name__, url_prefix="/review/flows")


@bp.route("/")
@login_required
def index() -> Any:
    book = build_flowbook()
    return render_template("flowbook/index.html", book=book, diagram=rules_diagram(book.rules), standalone=False)


@bp.route("/topics/<topic_id>")
@login_required
def topic(topic_id: str) -> Any:
    if topic_id not in TOPIC_IDS:
        abort(404)
    book = build_flowbook()
    page = next(t for t in book.topics if t.id == topic_id)
    return render_template("flowbook/topic_page.html", book=book, topic=page, standalone=False)


@bp.route("/crisis")
@login_required
def crisis() -> Any:
    book = build_flowbook()
    return render_template("flowbook/crisis_page.html", book=book, standalone=False)
