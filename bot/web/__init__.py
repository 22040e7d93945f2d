"""The web app (port 8080): the widget's files, a demo page, and later the advocates' review.

Structured like the Flask tutorial app: ``create_app`` builds the app, one
blueprint per area, templates per area extending ``base.html``.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

from flask import Flask

from bot.web import demo, security


def create_app(test_config: Optional[Dict[str, Any]] = None) -> Flask:
    app = Flask(__name__)
    app.config.from_mapping(
        # Where the widget on the demo page finds the Rasa server.
        RASA_URL=os.environ.get("BOT_PUBLIC_RASA_URL", "http://127.0.0.1:5005"),
        EXIT_URL=os.environ.get("BOT_EXIT_URL", "https://www.bbc.co.uk/weather"),
        REGION=os.environ.get("BOT_REGION", "us"),
        MAX_CONTENT_LENGTH=64 * 1024,
        SECRET_KEY=os.environ.get("BOT_SECRET_KEY") or os.urandom(32),
    )
    if test_config:
        app.config.update(test_config)
    security.init_app(app)
    app.register_blueprint(demo.bp)
    return app
