"""The review pages in headless Chromium, on conversations sent through the real REST channel."""
from __future__ import annotations

import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from bot import accounts
from bot.storage.schema import annotations, audit_log
from tests.browser import browser, page  # noqa: F401  (fixtures)
from tests.conftest import Chat

pytestmark = [pytest.mark.slow, pytest.mark.browser]
PASSWORD = "review pages passphrase"


@pytest.fixture(scope="module")
def reviewer(bot_url: str, web_url: str, shared_db: str) -> dict:
    url = shared_db
    name = f"adv{uuid.uuid4().hex[:6]}"
    accounts.add_user(name, "advocate", PASSWORD, url)
    crisis = Chat(bot_url)
    crisis.say("why do i miss him")
    crisis.say("hes outside banging on the door")
    Chat(bot_url).say('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1"> why do i miss her')
    return {"name": name, "db": url}


def log_in(page: Any, web_url: str, reviewer: dict) -> None:
    page.goto(f"{web_url}/review/")
    page.fill("#name", reviewer["name"])
    page.fill("#password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("h1:has-text('Overview')")


def test_log_in_filter_to_crisis_open_annotate_and_see_the_flow_book(page: Any, web_url: str, reviewer: dict) -> None:
    log_in(page, web_url, reviewer)
    assert page.locator("svg rect.rv-bar--handoffs").count() > 0
    page.click("text=Conversations")
    page.check("input[name=crisis]")
    page.click("button:has-text('Filter')")
    page.wait_for_selector("tr.rv-row--crisis")
    assert page.locator("tbody tr").count() == page.locator("tr.rv-row--crisis").count()
    page.locator("tr.rv-row--crisis a").first.click()
    page.wait_for_selector(".rv-crisis")
    turn = page.locator(".rv-turn", has_text="banging on the door")
    assert "crisis" in turn.inner_text() and "imminent_danger" in turn.inner_text()
    turn.locator("input[value=right]").check()
    turn.locator("textarea").fill("handoff was right and came first")
    turn.locator("button:has-text('Save')").click()
    page.wait_for_selector(".rv-flash")
    assert "handoff was right" in page.content()
    engine = sa.create_engine(reviewer["db"])
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(annotations).where(annotations.c.note == "handoff was right and came first")).scalar() == 1
        views = conn.execute(sa.select(sa.func.count()).select_from(audit_log).where(audit_log.c.user_name == reviewer["name"], audit_log.c.action == "view_transcript")).scalar()
    assert views >= 2  # the view before and after saving
    page.click("text=Flow book")
    page.wait_for_selector("h1:has-text('Flow book')")
    page.click("text=The crisis path")
    page.wait_for_selector("text=National Domestic Violence Hotline")
    assert page.locator("h1:has-text('The crisis path')").count() == 1


def test_visitor_html_is_shown_as_text(page: Any, web_url: str, reviewer: dict) -> None:
    log_in(page, web_url, reviewer)
    page.goto(f"{web_url}/review/conversations?topic=why_miss")
    links = page.locator("a:has-text('Open')")
    found = False
    for i in range(links.count()):
        page.goto(f"{web_url}/review/conversations?topic=why_miss")
        page.locator("a:has-text('Open')").nth(i).click()
        if page.locator(".rv-visitor", has_text="<script>").count():
            found = True
            break
    assert found, "the conversation with markup is listed"
    assert page.evaluate("window.__pwned === undefined")
    assert page.locator(".rv-turns img").count() == 0


def test_every_review_url_refuses_a_visitor_who_is_not_logged_in(page: Any, web_url: str) -> None:
    for path in ("/review/", "/review/conversations", "/review/flows/", "/review/audit"):
        page.goto(f"{web_url}{path}")
        assert "/review/login" in page.url
