"""The review pages with Flask's test client on a temporary database (fast, no servers)."""
from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from bot import accounts
from bot.cli import cli
from bot.storage import db
from bot.storage.schema import annotations, audit_log, conversations, events
from bot.web import create_app
from tests.conftest import PROJECT

PASSWORD = "a long enough passphrase"


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'review.db'}"
    monkeypatch.setenv("BOT_DB_URL", url)
    monkeypatch.setenv("BOT_VAR_DIR", str(tmp_path))
    from bot.web import database

    database._migrated = False
    db.migrate(url)
    accounts.add_user("ana", "advocate", PASSWORD, url)
    accounts.add_user("max", "maintainer", PASSWORD, url)
    return url


def seed_conversation(url: str, cid: str, texts: list, crisis: bool = False, ago_days: float = 0) -> None:
    """A stored conversation, as the tracker store writes it (already redacted)."""
    import json

    now = time.time() - ago_days * 86400
    rows = []
    seq = 0
    for text in texts:
        intent = "crisis" if crisis else "why_miss"
        rows.append({"conversation_id": cid, "seq": seq, "type": "user", "timestamp": now, "intent": intent, "confidence": 0.42,
                     "action": None, "policy": None, "text": text,
                     "data": json.dumps({"event": "user", "text": text, "parse_data": {"intent": {"name": intent, "confidence": 0.42}}})})
        seq += 1
        custom = {"type": "crisis_handoff", "category": "weapon", "resources": [{"name": "Emergency services", "phone": "911"}]} if crisis else {"type": "answer", "topic": "why_miss", "source": None}
        rows.append({"conversation_id": cid, "seq": seq, "type": "action", "timestamp": now, "intent": None, "confidence": None,
                     "action": "utter_answer_why_miss", "policy": "RulePolicy", "text": None,
                     "data": json.dumps({"event": "action", "name": "utter_answer_why_miss", "policy": "RulePolicy"})})
        seq += 1
        rows.append({"conversation_id": cid, "seq": seq, "type": "bot", "timestamp": now, "intent": None, "confidence": None,
                     "action": None, "policy": None, "text": "An answer <b>as sent</b>",
                     "data": json.dumps({"event": "bot", "text": "An answer <b>as sent</b>", "data": {"custom": custom}})})
        seq += 1
    with db.engine(url).begin() as conn:
        conn.execute(sa.insert(conversations).values(
            id=cid, channel="rest", started_at=now, last_active=now, event_count=seq, turns=len(texts),
            had_crisis=crisis, had_fallback=False, min_confidence=0.42,
            topics="" if crisis else ",why_miss,", crisis_categories=",weapon," if crisis else ""))
        conn.execute(sa.insert(events), rows)


@pytest.fixture
def app(db_url: str) -> Any:
    return create_app({"TESTING": True})


@pytest.fixture
def client(app: Any) -> Any:
    return app.test_client()


def token(client: Any, path: str = "/review/login") -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).get_data(as_text=True)).group(1)


def login(client: Any, name: str = "ana", password: str = PASSWORD) -> Any:
    return client.post("/review/login", data={"name": name, "password": password, "csrf_token": token(client)})


PROTECTED = [
    "/review/",
    "/review/conversations",
    "/review/conversations/abc123",
    "/review/flows/",
    "/review/flows/topics/why_miss",
    "/review/flows/crisis",
    "/review/audit",
]


@pytest.mark.parametrize("path", PROTECTED)
def test_login_required(client: Any, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 302 and "/review/login" in response.headers["Location"]


def test_posting_an_annotation_without_login_is_refused(client: Any) -> None:
    response = client.post("/review/conversations/abc/annotate", data={"seq": "0", "label": "right"})
    assert response.status_code in (302, 400)


def test_login_sets_a_strict_http_only_cookie_limited_to_review(client: Any) -> None:
    response = login(client)
    assert response.status_code == 302
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/review" in cookie
    assert client.get("/review/").status_code == 200


def test_a_form_without_the_csrf_token_is_refused(client: Any, db_url: str) -> None:
    login(client)
    seed_conversation(db_url, "c1", ["hello"])
    assert client.post("/review/conversations/c1/annotate", data={"seq": "0", "label": "right"}).status_code == 400
    assert client.post("/review/logout").status_code == 400
    assert client.post("/review/login", data={"name": "ana", "password": PASSWORD}).status_code == 400


def test_six_wrong_passwords_lock_the_account(client: Any) -> None:
    for _ in range(6):
        assert login(client, password="wrong password!!").status_code == 401
    response = login(client)
    assert response.status_code == 401
    assert "locked" in response.get_data(as_text=True)


def test_every_transcript_view_leaves_an_audit_row(client: Any, db_url: str) -> None:
    seed_conversation(db_url, "c2", ["why do i miss him"])
    login(client)
    for _ in range(2):
        assert client.get("/review/conversations/c2").status_code == 200
    with db.engine(db_url).connect() as conn:
        rows = conn.execute(sa.select(audit_log.c.user_name).where(audit_log.c.action == "view_transcript", audit_log.c.conversation_id == "c2")).all()
    assert [r.user_name for r in rows] == ["ana", "ana"]


def test_only_maintainers_read_the_audit_log(client: Any) -> None:
    login(client)
    assert client.get("/review/audit").status_code == 403
    client.post("/review/logout", data={"csrf_token": token(client, "/review/")})
    login(client, "max")
    assert client.get("/review/audit").status_code == 200


def test_filters_find_crisis_conversations_and_low_confidence_turns(client: Any, db_url: str) -> None:
    seed_conversation(db_url, "calm", ["why do i miss him"])
    seed_conversation(db_url, "danger", ["he has a gun"], crisis=True)
    seed_conversation(db_url, "old", ["hi"], ago_days=40)
    login(client)
    page = client.get("/review/conversations?crisis=1").get_data(as_text=True)
    assert "danger"[:8] in page and "/review/conversations/calm" not in page
    page = client.get("/review/conversations?topic=why_miss").get_data(as_text=True)
    assert "/review/conversations/calm" in page and "/review/conversations/danger" not in page
    recent = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 5 * 86400))
    page = client.get(f"/review/conversations?from={recent}").get_data(as_text=True)
    assert "/review/conversations/old" not in page and "/review/conversations/calm" in page
    assert "/review/conversations/calm" in client.get("/review/conversations?below=0.5").get_data(as_text=True)
    assert "/review/conversations/calm" not in client.get("/review/conversations?below=0.3").get_data(as_text=True)


def test_visitor_html_shows_as_text(client: Any, db_url: str) -> None:
    seed_conversation(db_url, "xss", ['<script>alert("x")</script><img src=x onerror=alert(1)>'])
    login(client)
    page = client.get("/review/conversations/xss").get_data(as_text=True)
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    assert "<img src=x" not in page
    assert "An answer &lt;b&gt;as sent&lt;/b&gt;" in page


def test_annotations_are_stored_and_exported_as_phrases(client: Any, db_url: str) -> None:
    seed_conversation(db_url, "c3", ["my name is [NAME] and i keep checking his instagram", "he has a gun"])
    login(client)
    csrf = token(client, "/review/conversations/c3")
    assert client.post("/review/conversations/c3/annotate", data={"seq": "0", "label": "wrong_topic", "correct_intent": "still_feel_pull", "note": "checking = pull", "csrf_token": csrf}).status_code == 302
    assert client.post("/review/conversations/c3/annotate", data={"seq": "3", "label": "should_be_crisis", "csrf_token": csrf}).status_code == 302
    assert client.post("/review/conversations/c3/annotate", data={"seq": "0", "label": "wrong_topic", "correct_intent": "not_an_intent", "csrf_token": csrf}).status_code == 400
    with db.engine(db_url).connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(annotations)).scalar() == 2
    result = CliRunner().invoke(cli, ["reviews", "export"])
    assert result.exit_code == 0, result.output
    assert "still_feel_pull,my name is someone and i keep checking his instagram" in result.output
    assert "crisis,he has a gun" in result.output


def test_the_overview_draws_handoffs_and_fallbacks_per_day(client: Any, db_url: str) -> None:
    seed_conversation(db_url, "a", ["x"], crisis=True)
    login(client)
    page = client.get("/review/").get_data(as_text=True)
    assert "<svg" in page and "rv-bar--handoffs" in page and "why_miss" not in page.split("Answers per topic")[0][-10:]


def test_the_flow_book_shows_what_the_bot_says(client: Any) -> None:
    from bot.content import load_content

    login(client)
    store = load_content()
    topic_page = client.get("/review/flows/topics/why_miss").get_data(as_text=True)
    assert store.topic("why_miss").answer.split(".")[0].replace("'", "&#39;") in topic_page
    assert "Why Do I Miss Someone Who Hurt Me?" in topic_page
    crisis_page = client.get("/review/flows/crisis").get_data(as_text=True)
    assert "1-800-799-7233" in crisis_page and "suicide selfharm" in crisis_page and "at_the_door" in crisis_page
    index = client.get("/review/flows/").get_data(as_text=True)
    assert "<svg" in index and "utter_crisis_handoff" in index


def test_the_flowbook_command_writes_one_self_contained_file(tmp_path: Path, db_url: str) -> None:
    out = tmp_path / "book.html"
    result = CliRunner().invoke(cli, ["flowbook", "--out", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert "<style>" in html and 'rel="stylesheet"' not in html and "<script" not in html
    assert "utter_crisis_handoff" in html and "National Domestic Violence Hotline" in html


def test_users_command_creates_accounts_and_refuses_bad_ones(db_url: str) -> None:
    runner = CliRunner()
    ok = runner.invoke(cli, ["users", "add", "lee", "--role", "advocate", "--password-stdin"], input="twelve chars ok!\n")
    assert ok.exit_code == 0 and "created advocate lee" in ok.output
    short = runner.invoke(cli, ["users", "add", "kim", "--role", "advocate", "--password-stdin"], input="short\n")
    assert short.exit_code != 0 and "12 characters" in short.output
    twice = runner.invoke(cli, ["users", "add", "lee", "--role", "maintainer", "--password-stdin"], input="twelve chars ok!\n")
    assert twice.exit_code != 0 and "already exists" in twice.output
    listed = runner.invoke(cli, ["users", "list"])
    assert "lee\tadvocate" in listed.output
    with db.engine(db_url).connect() as conn:
        stored = conn.execute(sa.text("select password_hash from users where name='lee'")).scalar()
    assert stored.startswith("$argon2")


def test_review_pages_send_security_headers(client: Any) -> None:
    response = client.get("/review/login")
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Cache-Control"] == "no-store"
