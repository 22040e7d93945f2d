"""Security headers on every page of the web app (widget, demo, review).

A strict content security policy: scripts, styles and fonts only from this
server; the chat may connect to the Rasa server; no framing by other sites;
no referrer leaks the visitor's path to a linked hotline site.
"""
from __future__ import annotations

from urllib.parse import urlparse

from flask import Flask, Response, current_app


def connect_sources() -> str:
    rasa = urlparse(current_app.config["RASA_URL"])
    http = f"{rasa.scheme}://{rasa.netloc}"
    ws = f"{'wss' if rasa.scheme == 'https' else 'ws'}://{rasa.netloc}"
    return f"'self' {http} {ws}"


def add_headers(response: Response) -> Response:
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'self'; "
        f"connect-src {connect_sources()}; "
        "img-src 'self' data:; style-src 'self'; script-src 'self'; font-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    )
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=(), interest-cohort=()")
    response.headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
    if response.mimetype == "text/html":
        # Pages may show a visitor's words: never cache them anywhere.
        response.headers["Cache-Control"] = "no-store"
    return response


def init_app(app: Flask) -> None:
    app.after_request(add_headers)
