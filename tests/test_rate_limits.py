"""Rate limits of the chat channels (bot/channels/limits.py), through a real Rasa server.

The session server of conftest runs with the default limits; this module
starts its own server with low limits and a trusted proxy (127.0.0.1), so
that a test can stand for several client addresses with X-Forwarded-For.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest
import requests
import socketio

from bot.channels.limits import (
    DEFAULT_DANGER_PER_IP,
    DEFAULT_DANGER_PER_SENDER,
    DEFAULT_PER_IP,
    DEFAULT_PER_SENDER,
    RateLimiter,
    Route,
    TokenBuckets,
    TrustedProxies,
    client_address,
    parse_rate,
)
from tests.conftest import Chat, customs, running_bot

PER_SENDER = "3/30"  # a burst of 3, then one message every 10 s
PER_IP = "6/600"  # a burst of 6, then one every 100 s
DANGER_PER_SENDER = "2/600"  # over the limit, two danger messages of a conversation still go through the bot
TIMEOUT = 60


# ------------------------------------------------------------ unit level


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rates_are_read_from_the_environment_and_bad_values_refused() -> None:
    assert str(parse_rate("20/60")) == "20/60" and parse_rate("20").period == 60
    assert parse_rate("off") is None and parse_rate("0") is None
    for bad in ("", "x/60", "20/x", "0/60", "-1/60", "20/0", "20/-5", "20/inf"):
        with pytest.raises(ValueError):
            parse_rate(bad, "BOT_RATE_PER_SENDER")
    limiter = RateLimiter.from_env({})
    assert str(limiter.senders.rate) == DEFAULT_PER_SENDER and str(limiter.addresses.rate) == DEFAULT_PER_IP
    limiter = RateLimiter.from_env({"BOT_RATE_PER_SENDER": "off", "BOT_RATE_PER_IP": "5/10"})
    assert limiter.senders is None and limiter.addresses.rate.capacity == 5
    with pytest.raises(ValueError):
        RateLimiter.from_env({"BOT_RATE_PER_IP": "lots"})
    with pytest.raises(ValueError):
        RateLimiter.from_env({"BOT_TRUSTED_PROXIES": "nginx"})
    limiter = RateLimiter.from_env({})
    assert str(limiter.danger_senders.rate) == DEFAULT_DANGER_PER_SENDER
    assert str(limiter.danger_addresses.rate) == DEFAULT_DANGER_PER_IP
    assert RateLimiter.from_env({"BOT_RATE_DANGER_PER_SENDER": "off"}).danger_senders is None
    with pytest.raises(ValueError):
        RateLimiter.from_env({"BOT_RATE_DANGER_PER_IP": "many"})


def test_danger_over_the_limit_has_an_allowance_of_its_own() -> None:
    """Over the limit, a few danger messages still go through the bot; a loop of them does not."""
    clock = Clock()
    limiter = RateLimiter(parse_rate("1/60"), None, clock=clock, danger_per_sender=parse_rate("3/60"),
                          danger_per_ip=parse_rate("5/60"))
    assert limiter.check("visitor", None).allowed and not limiter.check("visitor", None).allowed
    assert [limiter.check_danger("visitor", None).allowed for _ in range(5)] == [True] * 3 + [False] * 2
    assert limiter.check_danger("another visitor", None).allowed  # the allowance is per conversation
    address = "hashed-address"
    assert [limiter.check_danger(f"s{i}", address).allowed for i in range(7)] == [True] * 5 + [False] * 2
    clock.now += 20  # a third of a minute refills one of three
    assert limiter.check_danger("visitor", None).allowed and not limiter.check_danger("visitor", None).allowed


def test_route_asks_about_danger_only_over_the_limit() -> None:
    limiter = RateLimiter(parse_rate("1/60"), None, clock=Clock(), danger_per_sender=parse_rate("1/60"))
    asked: List[str] = []

    def danger(answer: bool) -> Any:
        return lambda: asked.append("asked") or answer

    assert limiter.route("v", None, danger(True), "test")[0] is Route.BOT and asked == []
    route, verdict = limiter.route("v", None, danger(False), "test")
    assert route is Route.SLOW_DOWN and verdict.retry_after >= 1 and asked == ["asked"]
    assert limiter.route("v", None, danger(True), "test")[0] is Route.BOT  # within the danger allowance
    assert limiter.route("v", None, danger(True), "test")[0] is Route.CHANNEL_HANDOFF


def test_the_defaults_let_a_person_through_and_stop_a_script() -> None:
    clock = Clock()
    limiter = RateLimiter.from_env({"BOT_RATE_LIMIT_LOOPBACK": "1"})
    limiter.clock = limiter.senders.clock = limiter.addresses.clock = clock
    address = limiter.address_key("198.51.100.4")
    # A fast typist: a message every 4 s for an hour, never limited.
    for _ in range(900):
        assert limiter.check("person", address).allowed
        clock.now += 4
    # A script: 100 messages at once in one conversation.
    verdicts = [limiter.check("script", limiter.address_key("198.51.100.5")) for _ in range(100)]
    assert sum(v.allowed for v in verdicts) == parse_rate(DEFAULT_PER_SENDER).capacity
    # A script with a new sender id each time, from one address.
    verdicts = [limiter.check(f"s{i}", limiter.address_key("198.51.100.6")) for i in range(2000)]
    assert sum(v.allowed for v in verdicts) == parse_rate(DEFAULT_PER_IP).capacity
    assert {v.scope for v in verdicts if not v.allowed} == {"address"}


def test_token_buckets_refill_and_say_how_long_to_wait() -> None:
    clock = Clock()
    limiter = RateLimiter(parse_rate("3/15"), parse_rate("5/50"), clock=clock, limit_loopback=True)
    address = limiter.address_key("192.0.2.1")
    assert [limiter.check("a", address).allowed for _ in range(4)] == [True, True, True, False]
    refused = limiter.check("a", address)
    assert refused.scope == "sender" and refused.retry_after == 5
    clock.now += 2.5
    assert limiter.check("a", address).retry_after == 3  # 2.5 s left, rounded up
    clock.now += 2.5
    assert limiter.check("a", address).allowed
    assert limiter.check("b", address).allowed
    refused = limiter.check("c", address)  # the address has had 5
    assert not refused.allowed and refused.scope == "address" and refused.retry_after == 5  # 0.5 left, 0.1/s
    assert limiter.check("c", None).allowed  # an unknown address: the sender limit only


def test_buckets_are_forgotten_and_bounded() -> None:
    clock = Clock()
    buckets = TokenBuckets(parse_rate("2/10"), max_keys=100, clock=clock)
    for i in range(1000):
        buckets.take(f"k{i}")
    assert len(buckets) == 100
    clock.now += 10  # every bucket is full again
    buckets.take("new")
    assert len(buckets) == 1


def test_addresses_are_kept_only_as_keyed_hashes() -> None:
    limiter = RateLimiter(parse_rate("3/15"), parse_rate("5/50"), limit_loopback=True)
    for address in ("203.0.113.77", "2001:db8::77"):
        assert limiter.check("someone", limiter.address_key(address)).allowed
    state = repr(limiter.__dict__) + repr(limiter.addresses._buckets) + repr(limiter.senders._buckets)
    assert "203.0.113" not in state and "2001:db8" not in state and "someone" not in state
    other = RateLimiter(parse_rate("3/15"), parse_rate("5/50"), limit_loopback=True)
    assert other.address_key("203.0.113.77") != limiter.address_key("203.0.113.77")  # a key per process


def test_the_client_address_comes_from_x_forwarded_for_only_via_a_trusted_proxy() -> None:
    trusted = TrustedProxies.parse("127.0.0.1, 10.0.0.0/8")
    assert client_address("203.0.113.1", "198.51.100.1", TrustedProxies()) == "203.0.113.1"
    assert client_address("203.0.113.1", "198.51.100.1", trusted) == "203.0.113.1"  # not a trusted peer
    assert client_address("127.0.0.1", "198.51.100.1", trusted) == "198.51.100.1"
    assert client_address("127.0.0.1", "1.1.1.1, 198.51.100.1, 10.0.0.3", trusted) == "198.51.100.1"
    assert client_address("127.0.0.1", "198.51.100.1:5555", trusted) == "198.51.100.1"
    assert client_address("127.0.0.1", "[2001:db8::1]:443", trusted) == "2001:db8::1"
    assert client_address("127.0.0.1", "", trusted) is None  # the proxy does not say: unknown
    assert client_address("127.0.0.1", "10.0.0.2, 10.0.0.3", trusted) is None


def test_loopback_clients_are_limited_per_address_only_when_asked() -> None:
    limiter = RateLimiter.from_env({})
    assert limiter.address_key("127.0.0.1") is None and limiter.address_key("::1") is None
    assert limiter.address_key("::ffff:127.0.0.1") is None
    assert limiter.address_key("198.51.100.9") is not None
    assert RateLimiter.from_env({"BOT_RATE_LIMIT_LOOPBACK": "1"}).address_key("127.0.0.1") is not None


# ----------------------------------------------------- through the server


@pytest.fixture(scope="module")
def limited_bot(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """A Rasa server of its own with low limits, behind a 'proxy' at 127.0.0.1."""
    env = {"BOT_RATE_PER_SENDER": PER_SENDER, "BOT_RATE_PER_IP": PER_IP, "BOT_TRUSTED_PROXIES": "127.0.0.1",
           "BOT_RATE_DANGER_PER_SENDER": DANGER_PER_SENDER}
    with running_bot(model_path, tmp_path_factory.mktemp("limits"), name="rasa-limits", env=env) as bot:
        yield bot


def post(url: str, sender: str, message: str, address: Optional[str] = None) -> requests.Response:
    headers = {"X-Forwarded-For": address} if address else {}
    return requests.post(
        f"{url}/webhooks/rest/webhook", json={"sender": sender, "message": message}, headers=headers, timeout=TIMEOUT
    )


def burst(url: str, sender_of: Any, count: int, message: str = "hello", address: Optional[str] = None) -> List[requests.Response]:
    """``count`` messages at once (each limit is checked when the request arrives, before Rasa)."""
    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(lambda i: post(url, sender_of(i), message, address), range(count)))


def stored_user_texts(url: str, sender: str) -> List[str]:
    """What the conversation holds, read back through Rasa's HTTP API."""
    from bot.keys import api_token

    tracker = requests.get(f"{url}/conversations/{sender}/tracker", params={"token": api_token()}, timeout=TIMEOUT)
    assert tracker.status_code == 200, tracker.text
    return [e.get("text") for e in tracker.json()["events"] if e["event"] == "user"]


def assert_handoff_first(turn: List[Dict[str, Any]], category: str) -> None:
    kinds = [c["type"] for c in customs(turn)]
    assert kinds[0] == "crisis_handoff", kinds
    assert customs(turn, "crisis_handoff")[0]["category"] == category
    assert "1-800-799-7233" in turn[0]["text"]


@pytest.mark.slow
def test_a_sender_over_the_limit_gets_429_then_talks_again_after_waiting(limited_bot: Dict[str, Any]) -> None:
    url = limited_bot["url"]
    sender = f"fast-{uuid.uuid4().hex}"
    responses = burst(url, lambda i: sender, 4)
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200, 200, 200, 429], statuses
    refused = next(r for r in responses if r.status_code == 429)
    retry_after = int(refused.headers["Retry-After"])
    assert 1 <= retry_after <= 10
    error = refused.json()
    assert error["error"] == "rate_limited" and error["retry_after"] == retry_after
    assert "wait" in error["message"] and "emergency" in error["message"]

    # Other conversations are not affected.
    assert customs(Chat(url).say("why do i miss him"), "answer")[0]["topic"] == "why_miss"

    # Danger is never dropped: over the limit, it gets the handoff (English and Spanish),
    # through the bot, so the turns are stored for the advocates' review; past the
    # conversation's danger allowance (2 here), from the channel, not stored.
    for text, category in (("he has a gun", "weapon"), ("me quiere matar", "threat"), ("he is choking me", "strangulation")):
        response = post(url, sender, text)
        assert response.status_code == 200, response.text
        assert_handoff_first(response.json(), category)
    stored = stored_user_texts(url, sender)
    assert stored[-2:] == ["he has a gun", "me quiere matar"], stored
    assert "he is choking me" not in stored

    # After waiting as long as Retry-After says, the conversation goes on.
    deadline = time.monotonic() + 45
    while True:
        response = post(url, sender, "why do i miss him")
        if response.status_code != 429:
            break
        assert time.monotonic() < deadline, "still limited"
        time.sleep(int(response.headers["Retry-After"]) + 0.2)
    assert response.status_code == 200
    assert [a["topic"] for a in customs(response.json(), "answer")] == ["why_miss"]


@pytest.mark.slow
def test_an_address_over_the_limit_gets_429_and_other_addresses_do_not(limited_bot: Dict[str, Any]) -> None:
    url = limited_bot["url"]
    address = "203.0.113.7"
    responses = burst(url, lambda i: f"ip-{i}-{uuid.uuid4().hex}", 7, address=address)
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 6 + [429], statuses
    # A client cannot get round it by putting another address first.
    spoofed = post(url, f"ip-x-{uuid.uuid4().hex}", "hello", address=f"198.51.100.1, {address}")
    assert spoofed.status_code == 429 and int(spoofed.headers["Retry-After"]) >= 1
    # Danger from that address still gets the handoff.
    danger = post(url, f"ip-d-{uuid.uuid4().hex}", "he is choking me", address=address)
    assert danger.status_code == 200
    assert_handoff_first(danger.json(), "strangulation")
    # Other addresses, and the proxy itself without X-Forwarded-For (the client unknown), are not limited.
    assert post(url, f"ip-o-{uuid.uuid4().hex}", "hello", address="203.0.113.8").status_code == 200
    unknown = burst(url, lambda i: f"ip-u-{i}-{uuid.uuid4().hex}", 8)
    assert [r.status_code for r in unknown] == [200] * 8


@pytest.mark.slow
def test_the_server_log_holds_no_client_address(limited_bot: Dict[str, Any]) -> None:
    post(limited_bot["url"], f"log-{uuid.uuid4().hex}", "hello", address="203.0.113.99")
    burst(limited_bot["url"], lambda i: f"log-{i}-{uuid.uuid4().hex}", 8, address="203.0.113.99")
    log = limited_bot["rasa"].log_path.read_text(errors="replace")
    assert "rate limit" in log  # the limit was hit and logged ...
    assert "203.0.113" not in log  # ... without the address


async def socket_session(url: str, messages: List[str], address: Optional[str] = None, settle: float = 20) -> List[Dict[str, Any]]:
    """Emits every message at once on one socket; collects replies until each got one (or ``settle`` s)."""
    client = socketio.AsyncClient(reconnection=False)
    received: List[Dict[str, Any]] = []
    confirmed = asyncio.Event()
    client.on("bot_uttered", lambda data: received.append(data))
    client.on("session_confirm", lambda _: confirmed.set())
    headers = {"X-Forwarded-For": address} if address else {}
    await client.connect(url, socketio_path="/socket.io", transports=["websocket"], headers=headers, wait_timeout=10)
    await client.emit("session_request", {"session_id": None})
    await asyncio.wait_for(confirmed.wait(), 10)
    for message in messages:
        await client.emit("user_uttered", {"message": message, "customData": {}})
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:  # every turn has one answer, fallback, handoff or notice
        kinds = [m["custom"].get("type") for m in received if isinstance(m.get("custom"), dict)]
        if sum(kinds.count(k) for k in ("answer", "fallback", "crisis_handoff", "notice")) >= len(messages):
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(0.5)
    await client.disconnect()
    return received


@pytest.mark.slow
def test_socketio_over_the_limit_gets_a_calm_slow_down_and_danger_the_handoff(limited_bot: Dict[str, Any]) -> None:
    received = asyncio.run(socket_session(limited_bot["url"], ["hello", "hi", "hey", "hello?", "he has a gun"]))
    notices = [m["custom"] for m in received if m.get("custom", {}).get("type") == "notice"]
    assert len(notices) == 1, received
    assert notices[0]["reason"] == "rate_limited" and 1 <= notices[0]["retry_after"] <= 10
    texts = [m["text"] for m in received if m.get("text")]
    assert any("wait a few seconds" in t for t in texts)
    assert [m["custom"]["category"] for m in received if m.get("custom", {}).get("type") == "crisis_handoff"] == ["weapon"]
    assert not any("error" in m for m in received)


@pytest.mark.slow
def test_socketio_uses_the_address_seen_when_the_socket_connected(limited_bot: Dict[str, Any]) -> None:
    async def run() -> List[List[Dict[str, Any]]]:
        return [await socket_session(limited_bot["url"], ["hello"], address="203.0.113.30", settle=15) for _ in range(7)]

    sessions = asyncio.run(run())
    reasons = [[m["custom"].get("reason") for m in s if m.get("custom", {}).get("type") == "notice"] for s in sessions]
    assert reasons == [[]] * 6 + [["rate_limited"]], reasons
