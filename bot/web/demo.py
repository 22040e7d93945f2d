"""The widget's files and a demo page of a fictional support organisation."""
from __future__ import annotations

from pathlib import Path

from flask import Blueprint, abort, current_app, jsonify, render_template, send_from_directory

from bot.hotlines import regions

bp = Blueprint("demo", __name__)
WIDGET_DIR = Path(__file__).parent / "static" / "widget"


@bp.route("/")
def index() -> str:
    return render_template(
        "demo/index.html",
        rasa_url=current_app.config["RASA_URL"],
        exit_url=current_app.config["EXIT_URL"],
        region=current_app.config["REGION"],
    )


@bp.route("/widget/<path:filename>")
def widget_file(filename: str):
    return send_from_directory(WIDGET_DIR, filename, max_age=300)


@bp.route("/widget/hotlines/<region_id>.json")
def hotlines(region_id: str):
    """The hotline directory for the widget's offline card and "Get help now" (from data/hotlines)."""
    region = regions().get(region_id)
    if region is None:
        abort(404)
    response = jsonify(
        {
            "region": region.id,
            "name": region.name,
            "emergency_number": region.emergency_number,
            "crisis": region.crisis_resources("imminent_danger"),
            "referral": region.referral_resources(),
        }
    )
    response.headers["Access-Control-Allow-Origin"] = "*"  # embedding sites fetch it too
    return response


@bp.route("/healthz")
def health():
    return jsonify({"status": "ok"})
