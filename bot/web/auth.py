"""Logging in to /review: sessions, CSRF tokens, the login_required decorator."""
from __future__ import annotations

import functools
import hmac
import secrets
import time
from typing import Any, Callable, Optional

from flask import Blueprint, abort, flash, g, redirect, render_template, request, session, url_for

from bot import accounts
from bot.web.database import audit

bp = Blueprint("auth", __name__, url_prefix="/review")


def csrf_token() -> str:
    """The session's CSRF token (created on first use); every form carries it."""
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(32)
    return session["csrf"]


def check_csrf() -> None:
    """Refuses any state-changing request without the session's token (400)."""
    if request.method in ("POST", "PUT", "PATCH", "DELETE"):
        sent = request.form.get("csrf_token") or request.headers.get("X-CSRF-Token") or ""
        expected = session.get("csrf") or ""
        if not expected or not hmac.compare_digest(sent, expected):
            abort(400, description="The form expired or did not come from this site. Reload the page and try again.")


def load_user() -> None:
    user_id = session.get("user_id")
    g.user = accounts.get_user(user_id) if user_id else None


def login_required(view: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(view)
    def wrapped(**kwargs: Any) -> Any:
        if g.get("user") is None:
            return redirect(url_for("auth.login", next=request.path))
        return view(**kwargs)

    return wrapped


def maintainer_required(view: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(view)
    @login_required
    def wrapped(**kwargs: Any) -> Any:
        if not g.user.is_maintainer:
            abort(403)
        return view(**kwargs)

    return wrapped


def _safe_next(target: Optional[str]) -> str:
    if target and target.startswith("/review") and not target.startswith("//"):
        return target
    return url_for("review.overview")


@bp.route("/login", methods=("GET", "POST"))
def login() -> Any:
    if request.method == "POST":
        try:
            user = accounts.authenticate(request.form.get("name", ""), request.form.get("password", ""))
        except accounts.LoginRefused as refused:
            audit("login_refused", detail=(request.form.get("name") or "")[:64])
            flash(str(refused))
            return render_template("auth/login.html"), 401
        session.clear()  # a new session on login: no fixation
        session["user_id"] = user.id
        session["since"] = time.time()
        session.permanent = True
        g.user = user
        audit("login")
        return redirect(_safe_next(request.args.get("next")))
    return render_template("auth/login.html")


@bp.route("/logout", methods=("POST",))
def logout() -> Any:
    if g.get("user"):
        audit("logout")
    session.clear()
    return redirect(url_for("auth.login"))
