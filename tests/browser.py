"""Headless Chromium (Debian's) driven by Playwright, for the browser tests.

The browser is module-scoped on purpose: Playwright's sync API keeps an
asyncio loop marked as running in this thread while it is open, which would
break every later test that calls ``asyncio.run``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
AXE = Path(__file__).parent.parent / "node_modules" / "axe-core" / "axe.min.js"


@pytest.fixture(scope="module")
def browser() -> Iterator["object"]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: run scripts/system-deps.sh (make test does)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: "object") -> Iterator["object"]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    yield page
    context.close()
