"""Promotion: a model goes live only if it hands off every crisis and answers no worse.

The gate: crisis recall on the crisis test file (and the dev set) is 100 %,
and dev-set topic accuracy is at most one point below the live model's.
``--force --reason`` overrides and records who and why. Going live is a hot
swap through Rasa's HTTP API (``PUT /model``, protected by the auth token):
the old model keeps answering until the new one is loaded, so no
conversation is dropped.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import requests

from bot.keys import api_token

MAX_ACCURACY_DROP = 0.01


@dataclass
class GateResult:
    passed: bool
    reasons: List[str] = field(default_factory=list)


def gate(candidate: Dict[str, Any], live: Optional[Dict[str, Any]]) -> GateResult:
    reasons = []
    crisis_file = candidate["crisis_file"]["crisis_recall"]
    if crisis_file < 1.0:
        missed = [m["text"] for m in candidate["crisis_file"]["misses"] if m["problem"].startswith(("missed", "handoff"))]
        reasons.append(f"crisis recall on the crisis test file is {100 * crisis_file:.1f} %, not 100 % (missed: {missed[:5]})")
    if candidate["dev"]["crisis_recall"] < 1.0:
        reasons.append(f"crisis recall on the dev set is {100 * candidate['dev']['crisis_recall']:.1f} %, not 100 %")
    if live is not None:
        drop = live["dev"]["topic_accuracy"] - candidate["dev"]["topic_accuracy"]
        if drop > MAX_ACCURACY_DROP:
            reasons.append(
                f"topic accuracy dropped by {100 * drop:.1f} points "
                f"({100 * live['dev']['topic_accuracy']:.1f} % -> {100 * candidate['dev']['topic_accuracy']:.1f} %), more than 1"
            )
    return GateResult(passed=not reasons, reasons=reasons)


def server_urls() -> List[str]:
    """The Rasa servers to swap (BOT_SERVER_URLS, comma or space separated)."""
    raw = os.environ.get("BOT_SERVER_URLS", "http://127.0.0.1:5005")
    return [u.rstrip("/") for u in raw.replace(",", " ").split() if u]


@dataclass
class SwapResult:
    url: str
    ok: bool
    detail: str


def hot_swap(model: Path, urls: Optional[List[str]] = None, timeout: float = 180.0) -> List[SwapResult]:
    """Loads ``model`` into each running server; a server that is not running is reported, not fatal."""
    results = []
    for url in urls or server_urls():
        try:
            response = requests.put(
                f"{url}/model",
                params={"token": api_token()},
                json={"model_file": str(Path(model).resolve())},
                timeout=timeout,
            )
        except requests.ConnectionError:
            results.append(SwapResult(url, False, "not running (it will load the live model when started)"))
            continue
        if response.status_code == 204:
            results.append(SwapResult(url, True, "model loaded"))
        else:
            results.append(SwapResult(url, False, f"HTTP {response.status_code}: {response.text[:200]}"))
    return results
