"""Intruders, through the real servers: Rasa's HTTP API, CORS, the web app's security headers.

Already covered elsewhere, not repeated here: the review pages need a login,
CSRF, lockout and the review login page's CSP with Flask's test client
(tests/test_review_app.py); bad input and rate limits on the channels
(tests/test_reply_contract.py and the channel tests).
"""
from __future__ import annotations

import uuid
from typing import Any, Dict, List, Optional

import pytest
import requests

from bot.keys import api_token
from tests.conftest import Chat

pytestmark = pytest.mark.slow

CONVERSATION = f"security-{uuid.uuid4().hex}"

# (method, path, JSON body) of Rasa's HTTP API: every one needs the token.
API = [
    ("GET", "/status", None),
    ("GET", "/domain", None),
    ("GET", f"/conversations/{CONVERSATION}/tracker", None),
    ("GET", f"/conversations/{CONVERSATION}/story", None),
    ("POST", f"/conversations/{CONVERSATION}/tracker/events", {"event": "slot", "name": "region", "value": "uk"}),
    ("PUT", f"/conversations/{CONVERSATION}/tracker/events", []),
    ("POST", f"/conversations/{CONVERSATION}/messages", {"text": "hi", "sender": "user"}),
    ("POST", f"/conversations/{CONVERSATION}/execute", {"name": "utter_greet"}),
    ("POST", f"/conversations/{CONVERSATION}/trigger_intent", {"name": "greet"}),
    ("POST", f"/conversations/{CONVERSATION}/predict", None),
    ("POST", "/model/parse", {"text": "why do i miss him"}),
    ("POST", "/model/predict", []),
    ("PUT", "/model", {"model_file": "/etc/passwd"}),
    ("DELETE", "/model", None),
    ("POST", "/model/train", {}),
    ("POST", "/model/test/intents", {}),
    ("POST", "/model/test/stories", {}),
]
API_IDS = [f"{m} {p.replace(CONVERSATION, '<id>')}" for m, p, _ in API]


def call(bot_url: str, method: str, path: str, body: Any, token: Optional[str]) -> requests.Response:
    params = {"token": token} if token is not None else None
    return requests.request(method, bot_url + path, params=params, json=body, timeout=60)


@pytest.mark.parametrize("method,path,body", API, ids=API_IDS)
def test_the_api_refuses_requests_without_the_token(bot_url: str, method: str, path: str, body: Any) -> None:
    response = call(bot_url, method, path, body, None)
    assert response.status_code in (401, 403), response.text[:300]


@pytest.mark.parametrize("method,path,body", API, ids=API_IDS)
def test_the_api_refuses_a_wrong_token(bot_url: str, method: str, path: str, body: Any) -> None:
    for wrong in ("wrong", api_token()[:-1], api_token() + "x", api_token().upper(), ""):
        if wrong == api_token():
            continue
        response = call(bot_url, method, path, body, wrong)
        assert response.status_code in (401, 403), (wrong, response.text[:300])


def test_the_token_in_a_header_is_not_enough(bot_url: str) -> None:
    """Only ?token= is accepted (no JWT secret is configured): a bearer header opens nothing."""
    response = requests.get(f"{bot_url}/status", headers={"Authorization": f"Bearer {api_token()}"}, timeout=30)
    assert response.status_code in (401, 403)


def test_the_api_answers_with_the_right_token(bot_url: str) -> None:
    token = api_token()
    Chat(bot_url, CONVERSATION).say("why do i miss him")
    status = call(bot_url, "GET", "/status", None, token)
    assert status.status_code == 200 and status.json().get("model_file")
    domain = requests.get(f"{bot_url}/domain", params={"token": token}, headers={"Accept": "application/json"}, timeout=30)
    assert domain.status_code == 200 and domain.json().get("intents")
    parse = call(bot_url, "POST", "/model/parse", {"text": "why do i miss him"}, token)
    assert parse.status_code == 200 and parse.json()["intent"]["name"]
    tracker = call(bot_url, "GET", f"/conversations/{CONVERSATION}/tracker", None, token)
    assert tracker.status_code == 200
    assert any(e.get("event") == "user" for e in tracker.json()["events"])


def test_the_api_token_never_reaches_the_server_log(bot_url: str, servers: Dict[str, Any]) -> None:
    call(bot_url, "GET", "/status", None, api_token())
    call(bot_url, "GET", "/status", None, "a-wrong-token-probe")
    log = servers["rasa"].log_path.read_text(errors="replace")
    assert api_token() not in log


# ---------------------------------------------------------------- CORS on the REST webhook


def cors_origins(command: List[str]) -> List[str]:
    """The origins a started Rasa server was given with --cors."""
    start = command.index("--cors") + 1
    out = []
    for arg in command[start:]:
        if arg.startswith("--"):
            break
        out.append(arg)
    return out


def post_from(bot_url: str, origin: str) -> requests.Response:
    return requests.post(f"{bot_url}/webhooks/rest/webhook", headers={"Origin": origin},
                         json={"sender": f"cors-{uuid.uuid4().hex}", "message": "hi"}, timeout=60)


def preflight_from(bot_url: str, origin: str) -> requests.Response:
    return requests.options(f"{bot_url}/webhooks/rest/webhook", timeout=30, headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        # What the widget sends: the conversation id header is for the load balancer.
        "Access-Control-Request-Headers": "content-type,x-conversation-id"})


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://127.0.0.1:1", "http://127.0.0.1.evil.example"])
def test_an_unknown_origin_gets_no_cors_header(bot_url: str, origin: str) -> None:
    for response in (post_from(bot_url, origin), preflight_from(bot_url, origin)):
        assert "Access-Control-Allow-Origin" not in response.headers, dict(response.headers)


def test_an_origin_given_to_the_server_gets_the_cors_header(bot_url: str, servers: Dict[str, Any]) -> None:
    origins = cors_origins(servers["rasa"].command)
    assert origins and "*" not in origins
    for origin in origins:
        assert post_from(bot_url, origin).headers.get("Access-Control-Allow-Origin") == origin
        allowed = preflight_from(bot_url, origin).headers
        assert allowed.get("Access-Control-Allow-Origin") == origin
        assert {"content-type", "x-conversation-id"} <= {
            h.strip().lower() for h in allowed.get("Access-Control-Allow-Headers", "").split(",")}, dict(allowed)


def test_the_web_apps_origin_may_call_the_rest_webhook(bot_url: str, web_url: str) -> None:
    origin = web_url  # BOT_ALLOWED_ORIGINS of the session server (conftest)
    assert post_from(bot_url, origin).headers.get("Access-Control-Allow-Origin") == origin


def socketio_handshake(bot_url: str, origin: str) -> requests.Response:
    return requests.get(f"{bot_url}/socket.io/", params={"EIO": "4", "transport": "polling"},
                        headers={"Origin": origin}, timeout=30)


def test_socketio_accepts_only_the_allowed_origin(bot_url: str, web_url: str) -> None:
    allowed = socketio_handshake(bot_url, web_url)  # BOT_ALLOWED_ORIGINS of the session server (conftest)
    assert allowed.status_code == 200, allowed.text
    assert allowed.headers.get("Access-Control-Allow-Origin") == web_url
    refused = socketio_handshake(bot_url, "https://evil.example")
    assert refused.status_code in (400, 403)
    assert "Access-Control-Allow-Origin" not in refused.headers


# ---------------------------------------------------------------- the web app's headers

PAGES = ["/", "/review/login", "/widget/example.html"]
WIDGET_FILES = {"/widget/chat-widget.js": "javascript", "/widget/chat-widget.css": "text/css"}


@pytest.mark.parametrize("path", PAGES + list(WIDGET_FILES) + ["/widget/hotlines/us.json"])
def test_every_response_of_the_web_app_sends_the_basic_headers(web_url: str, path: str) -> None:
    response = requests.get(web_url + path, timeout=30)
    assert response.status_code == 200
    assert response.headers.get("X-Content-Type-Options") == "nosniff"
    assert response.headers.get("Referrer-Policy") == "no-referrer"


@pytest.mark.parametrize("path", PAGES)
def test_pages_cannot_be_framed_and_run_only_their_own_scripts(web_url: str, path: str) -> None:
    """The review pages (and the demo page) must never be framed: clickjacking an advocate."""
    response = requests.get(web_url + path, timeout=30)
    csp = _directives(response.headers["Content-Security-Policy"])
    assert csp["frame-ancestors"] == ["'none'"]
    assert response.headers.get("X-Frame-Options") == "DENY"
    assert csp["script-src"] == ["'self'"]  # no inline script, no eval
    assert csp["object-src"] == ["'none'"] and csp["base-uri"] == ["'none'"]
    assert response.headers.get("Cache-Control") == "no-store"


@pytest.mark.parametrize("path,kind", list(WIDGET_FILES.items()))
def test_the_widget_files_can_be_embedded_by_other_sites(web_url: str, path: str, kind: str) -> None:
    """The widget is a script (and its stylesheet) that other sites include, not a framed page:
    a CSP on these responses binds nothing (frame-ancestors applies to documents only), but
    with nosniff their type must be right, and nothing may forbid a cross-origin load."""
    response = requests.get(web_url + path, headers={"Origin": "https://shelter.example"}, timeout=30)
    assert kind in response.headers["Content-Type"]
    assert response.headers.get("Cross-Origin-Resource-Policy", "cross-origin") == "cross-origin"
    assert "Cross-Origin-Embedder-Policy" not in response.headers


def test_the_hotline_directory_is_readable_by_embedding_sites(web_url: str) -> None:
    response = requests.get(web_url + "/widget/hotlines/us.json", headers={"Origin": "https://shelter.example"},
                            timeout=30)
    assert response.headers.get("Access-Control-Allow-Origin") == "*"
    assert "Set-Cookie" not in response.headers


def test_the_review_login_page_sets_no_cookie_readable_by_scripts(web_url: str) -> None:
    response = requests.get(web_url + "/review/login", timeout=30)
    for cookie in response.raw.headers.getlist("Set-Cookie"):
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower(), cookie


def _directives(csp: str) -> Dict[str, List[str]]:
    out: Dict[str, List[str]] = {}
    for part in csp.split(";"):
        words = part.split()
        if words:
            out[words[0].lower()] = words[1:]
    return out
