"""The chat widget in a real browser (headless Chromium): answers, crisis card, quick exit, no traces."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

from tests.browser import AXE, browser, page  # noqa: F401  (fixtures)
from tests.conftest import PROJECT, free_port

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SCREENSHOTS = PROJECT / "var" / "screenshots"  # make screenshots copies them to docs/


def open_chat(page, url: str) -> None:
    page.goto(url)
    page.click("[data-cw=launcher]")
    page.wait_for_selector("[data-cw=panel]", state="visible")


def send(page, text: str) -> None:
    page.fill("[data-cw=input]", text)
    page.click("[data-cw=send]")


def bot_messages(page) -> list:
    return page.locator(".cw-message--bot").all_inner_texts()


def test_asking_why_do_i_miss_him_shows_answer_source_and_disclaimer(page, web_url: str) -> None:
    open_chat(page, web_url)
    send(page, "why do i miss him")
    page.wait_for_selector(".cw-source")
    assert any("nervous system" in text for text in bot_messages(page))
    assert "Why Do I Miss Someone Who Hurt Me?" in page.inner_text(".cw-source")
    assert "Life After Ours" in page.inner_text(".cw-source")
    assert page.locator(".cw-disclaimer").count() >= 1
    assert page.locator(".cw-message--user").first.inner_text().strip() == "why do i miss him"
    # suggestion buttons answer their topic
    page.locator(".cw-suggestion", has_text="What is a trauma bond?").click()
    page.locator(".cw-source").nth(1).wait_for()


def test_a_danger_message_shows_the_crisis_card_with_tel_links(page, web_url: str) -> None:
    open_chat(page, web_url)
    send(page, "hes outside banging on the door")
    card = page.wait_for_selector(".cw-crisis")
    assert card.query_selector("a[href^='tel:911']")
    assert card.query_selector("a[href^='tel:18007997233']")
    sms = card.query_selector("a[href^='sms:']")
    assert sms and "88788" in sms.get_attribute("href") and "START" in sms.get_attribute("href")


def test_get_help_now_opens_the_hotline_card_without_the_server(page, web_url: str) -> None:
    requests_made = []
    page.on("request", lambda r: requests_made.append(r.url) if "/webhooks/" in r.url else None)
    open_chat(page, web_url)
    page.click("[data-cw=help-now]")
    card = page.wait_for_selector("[data-cw=hotline-card]", state="visible")
    assert card.query_selector("a[href^='tel:']")
    assert not requests_made


def no_traces(page) -> dict:
    return page.evaluate(
        """() => ({
            local: window.localStorage ? window.localStorage.length : 0,
            session: window.sessionStorage ? window.sessionStorage.length : 0,
            cookies: document.cookie,
        })"""
    )


@pytest.mark.parametrize("how", ["click", "shift"])
def test_quick_exit_leaves_no_trace_and_back_does_not_return(page, web_url: str, how: str) -> None:
    page.goto(f"{web_url}/healthz")  # some page before the chat
    open_chat(page, web_url)
    send(page, "why do i miss him")
    page.wait_for_selector(".cw-source")
    assert no_traces(page) == {"local": 0, "session": 0, "cookies": ""}
    if how == "click":
        page.click("[data-cw=exit]")
    else:
        page.locator("body").click(position={"x": 5, "y": 5})
        for _ in range(3):
            page.keyboard.press("Shift")
    page.wait_for_url("**/healthz")
    assert "why do i miss him" not in page.content()
    assert no_traces(page)["cookies"] == ""
    page.go_back()
    page.wait_for_timeout(500)
    assert page.locator("[data-cw=root]").count() == 0 or "why do i miss him" not in page.content()
    assert page.url != web_url + "/"


def test_typing_capital_letters_does_not_trigger_the_quick_exit(page, web_url: str) -> None:
    open_chat(page, web_url)
    page.click("[data-cw=input]")
    page.keyboard.type("Hi There Friend")
    page.wait_for_timeout(300)
    assert page.url.startswith(web_url) and page.locator("[data-cw=panel]").is_visible()


def test_when_the_server_is_down_the_widget_says_so_and_shows_the_hotlines(page, web_url: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    page.goto(web_url)
    page.evaluate(
        """(dead) => {
            document.querySelectorAll('[data-cw=root]').forEach(n => n.remove());
        }""",
        dead,
    )
    html = f"""<!doctype html><html lang="en"><head><title>t</title></head><body>
      <script src="{web_url}/widget/chat-widget.js" data-server-url="{dead}" data-region="us"></script></body></html>"""
    page.route(f"{web_url}/offline-test", lambda route: route.fulfill(status=200, content_type="text/html", body=html))
    open_chat(page, f"{web_url}/offline-test")
    send(page, "hello")
    page.wait_for_selector("[data-cw=offline]", timeout=30_000)
    card = page.wait_for_selector("[data-cw=hotline-card]")
    assert card.query_selector("a[href^='tel:911']")


def test_html_sent_by_the_visitor_is_shown_as_text(page, web_url: str) -> None:
    open_chat(page, web_url)
    page.evaluate("window.__pwned = false")
    send(page, "<img src=x onerror=\"window.__pwned=true\"><script>window.__pwned=true</script>")
    page.wait_for_selector(".cw-message--bot")
    page.wait_for_timeout(500)
    assert page.evaluate("window.__pwned") is False
    assert "<img src=x" in page.locator(".cw-message--user").first.inner_text()
    assert page.locator(".cw-log img").count() == 0


def test_html_returned_by_the_bot_is_shown_as_text(page, web_url: str) -> None:
    evil = "<img src=x onerror=\"window.__pwned=true\"> <b>bold</b> <script>window.__pwned=true</script>"
    body = json.dumps(
        [
            {"recipient_id": "x", "text": evil, "buttons": [{"title": "<img src=y onerror=alert(1)>", "payload": "/greet"}]},
            {"recipient_id": "x", "custom": {"type": "answer", "topic": "why_miss", "source": {"title": evil, "publisher": "p", "date": None}}},
            {"recipient_id": "x", "custom": {"type": "crisis_handoff", "category": "plea", "resources": [
                {"name": evil, "phone": "911\"><img src=z onerror=alert(2)>", "sms": None, "url": "javascript:alert(3)"}]}},
        ]
    )
    page.route("**/webhooks/rest/webhook", lambda route: route.fulfill(status=200, content_type="application/json", body=body))
    html = f"""<!doctype html><html lang="en"><head><title>t</title></head><body>
      <script src="{web_url}/widget/chat-widget.js" data-server-url="{web_url}" data-transport="rest"></script></body></html>"""
    page.route(f"{web_url}/xss-test", lambda route: route.fulfill(status=200, content_type="text/html", body=html))
    open_chat(page, f"{web_url}/xss-test")
    page.evaluate("window.__pwned = false")
    send(page, "hello")
    page.wait_for_selector(".cw-crisis")
    page.wait_for_timeout(500)
    assert page.evaluate("window.__pwned") is False
    assert page.locator(".cw-log img, .cw-panel img").count() == 0
    assert "<img src=x" in page.locator(".cw-message--bot").first.inner_text()
    assert page.locator("a[href^='javascript:']").count() == 0


def test_no_serious_or_critical_accessibility_violations(browser, web_url: str) -> None:  # noqa: F811
    # axe is injected by the test, so this context lets it past the page's CSP.
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    page = context.new_page()
    open_chat(page, web_url)
    send(page, "why do i miss him")
    page.wait_for_selector(".cw-source")
    send(page, "he has a gun")
    page.wait_for_selector(".cw-crisis")
    page.add_script_tag(path=str(AXE))
    results = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    serious = [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:3]}
        for v in results["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    context.close()
    assert serious == []


def test_keyboard_only_use(page, web_url: str) -> None:
    page.goto(web_url)
    page.focus("[data-cw=launcher]")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-cw=panel]", state="visible")
    assert page.evaluate("document.activeElement.getAttribute('data-cw')") == "input"
    page.keyboard.type("what is a trauma bond")
    page.keyboard.press("Enter")
    page.wait_for_selector(".cw-source")
    page.keyboard.press("Escape")
    assert page.evaluate("document.activeElement.getAttribute('data-cw')") == "launcher"


def test_usable_at_320px_and_screenshots(browser, web_url: str) -> None:  # noqa: F811
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for width, height in ((320, 640), (375, 760), (1280, 860)):
        context = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1)
        page = context.new_page()
        open_chat(page, web_url)
        send(page, "why do i miss him")
        page.wait_for_selector(".cw-source")
        page.wait_for_timeout(1800)
        box = page.locator("[data-cw=panel]").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1
        assert page.evaluate("document.documentElement.scrollWidth") <= width + 1
        if width in (375, 1280):
            page.screenshot(path=str(SCREENSHOTS / f"widget-{width}.png"))
            send(page, "hes outside banging on the door")
            page.wait_for_selector(".cw-crisis")
            page.wait_for_timeout(1800)  # replies have stopped: the typing indicator is gone
            page.locator(".cw-crisis").scroll_into_view_if_needed()
            page.screenshot(path=str(SCREENSHOTS / f"crisis-{width}.png"))
        context.close()



def test_over_rest_the_widget_sends_its_conversation_id_for_the_load_balancer(page, web_url: str, bot_url: str) -> None:
    """The demo page with the WebSocket refused: the widget falls back to REST, a real
    cross-origin request to the bot, and CORS lets its X-Conversation-Id header through
    (deploy/'s nginx keeps a conversation on one server by it)."""
    page.route_web_socket("**/socket.io/**", lambda ws: ws.close())
    sent = []
    page.on("request", lambda request: sent.append(request)
            if request.url == f"{bot_url}/webhooks/rest/webhook" and request.method == "POST" else None)
    open_chat(page, web_url)
    send(page, "why do i miss him")
    page.wait_for_selector(".cw-source")
    assert "Why Do I Miss Someone Who Hurt Me?" in page.inner_text(".cw-source")
    assert sent, "the widget did not fall back to REST"
    header = sent[0].headers.get("x-conversation-id")
    assert header and header == json.loads(sent[0].post_data)["sender"]


def test_over_rest_too_many_messages_shows_the_servers_own_slow_down_message(page, web_url: str, bot_url: str) -> None:
    """A 429 from the real server: the widget shows how long to wait and what to do in danger,
    not the generic "say it another way" (which would only make a visitor type again at once)."""
    from bot.build import flat
    from bot.content import load_content

    page.route_web_socket("**/socket.io/**", lambda ws: ws.close())
    senders = []
    page.on("request", lambda request: senders.append(json.loads(request.post_data)["sender"])
            if request.url == f"{bot_url}/webhooks/rest/webhook" and request.method == "POST" else None)
    open_chat(page, web_url)
    send(page, "hello")
    page.wait_for_selector(".cw-message--bot")
    assert senders, "the widget did not fall back to REST"
    # The same conversation uses up its allowance (20 messages a minute) from elsewhere.
    for _ in range(25):
        if requests.post(f"{bot_url}/webhooks/rest/webhook", json={"sender": senders[0], "message": "hello"},
                         timeout=30).status_code == 429:
            break
    else:
        pytest.fail("the conversation was never limited")
    shown = page.locator(".cw-message--bot, .cw-system")
    before = shown.count()
    send(page, "are you still there")
    shown.nth(before).wait_for()
    slow_down = flat(load_content().messages["slow_down"])
    assert bot_messages(page)[-1].split() == slow_down.split()
    assert page.locator(".cw-system").count() == 0
