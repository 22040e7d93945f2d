"""The web app (port 8080): the widget's files, a demo page, and later the advocates' review.

Structured like the Flask tutorial app: ``create_app`` builds the app, one
blueprint per area, templates per area extending ``base.html``.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

from datetime import timedelta

from flask import Flask

from bot.keys import secret_key
from bot.web import auth, database, demo, flows, review, security


def create_app(test_config: Optional[Dict[str, Any]] = None) -> Flask:
    app = Flask(__name__)
    app.config.from_mapping(
        # Where the widget on the demo page finds the Rasa server.
        RASA_URL=os.environ.get("BOT_PUBLIC_RASA_URL", "http://127.0.0.1:5005"),
        EXIT_URL=os.environ.get("BOT_EXIT_URL", "https://www.bbc.co.uk/weather"),
        REGION=os.environ.get("BOT_REGION", "us"),
        MAX_CONTENT_LENGTH=64 * 1024,
        SECRET_KEY=secret_key(),
        SESSION_COOKIE_NAME="review_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        # Secure cookies behind HTTPS (set BOT_SECURE_COOKIES=1 in production).
        SESSION_COOKIE_SECURE=os.environ.get("BOT_SECURE_COOKIES", "") == "1",
        SESSION_COOKIE_PATH="/review",
        PERMANENT_SESSION_LIFETIME=timedelta(hours=8),
    )
    if test_config:
        app.config.update(test_config)
    security.init_app(app)
    database.init_app(app)
    app.register_blueprint(demo.bp)
    app.register_blueprint(auth.bp)
    app.register_blueprint(review.bp)
    app.register_blueprint(flows.bp)
    app.jinja_env.globals["csrf_token"] = auth.csrf_token

    @app.before_request
    def _review_guards() -> None:
        from flask import request

        if request.path.startswith("/review"):
            auth.load_user()
            auth.check_csrf()

    return app
