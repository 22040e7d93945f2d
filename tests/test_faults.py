"""Faults on real engines: Redis down, a server killed under load, a full disk.

Every test runs against its own Rasa server (started in a module fixture) so
that stopping Redis, killing a server or filling a disk never disturbs the
session server that the other tests use. Already covered elsewhere, and not
repeated here: PostgreSQL down at start-up and in the middle of a
conversation (tests/test_storage_postgres.py), the action server down
(tests/test_crisis_rest.py), one of two servers killed behind nginx
(tests/test_scale_out.py).
"""
from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import aiohttp
import pytest
import redis
import requests

from bot.build import flat
from bot.content import load_content
from bot.keys import api_token
from bot.local_services import PostgresServer, RedisServer
from bot.server import Service, actions_service, rasa_service
from bot.storage.tracker_store import conversation_id
from tests.conftest import TEST_SECRET, Chat, customs, free_port, write_endpoints

pytestmark = pytest.mark.slow


# ---------------------------------------------------------------- helpers


def start_rasa(model_path: Path, work: Path, action_port: int, name: str, db_url: str = "",
               extra: Optional[Dict[str, Any]] = None, port: Optional[int] = None,
               env: Optional[Dict[str, str]] = None) -> Tuple[Service, str]:
    """A Rasa server with its own endpoints file (started, not yet ready)."""
    work.mkdir(parents=True, exist_ok=True)
    endpoints = write_endpoints(work / f"endpoints-{name}.yml", action_port, extra=extra, db_url=db_url)
    port = port or free_port()
    server = rasa_service(model_path, port=port, endpoints=str(endpoints), env=env, name=name).start(work)
    return server, f"http://127.0.0.1:{port}"


def log_text(service: Service) -> str:
    return service.log_path.read_text(errors="replace") if service.log_path and service.log_path.exists() else ""


def degraded_text() -> str:
    return flat(load_content().messages["degraded"])


def assert_handoff_first(turn: List[Dict[str, Any]]) -> Dict[str, Any]:
    kinds = [c.get("type") for c in customs(turn)]
    assert kinds and kinds[0] == "crisis_handoff", turn
    assert "1-800-799-7233" in turn[0]["text"], turn
    return customs(turn, "crisis_handoff")[0]


def answered(turn: List[Dict[str, Any]], topic: str = "") -> bool:
    return any(c.get("topic") == topic or not topic for c in customs(turn, "answer"))


def sqlite_user_texts(path: Path, sender: str) -> List[str]:
    cid = conversation_id(sender, TEST_SECRET.encode())
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)) as conn:
        rows = conn.execute("SELECT text FROM events WHERE conversation_id = ? AND type = 'user' ORDER BY seq",
                            (cid,)).fetchall()
    return [r[0] for r in rows]


def postgres_events(postgres: PostgresServer, sender: str) -> List[Tuple[int, str, str]]:
    cid = conversation_id(sender, TEST_SECRET.encode())
    out = postgres.psql("SELECT coalesce(json_agg(json_build_array(seq, type, text) ORDER BY seq), '[]') "
                        f"FROM events WHERE conversation_id = '{cid}'")
    return [(int(seq), kind, text or "") for seq, kind, text in json.loads(out.strip() or "[]")]


@pytest.fixture(scope="module")
def actions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """One action server for every Rasa server of this module."""
    port = free_port()
    service = actions_service(port=port).start(tmp_path_factory.mktemp("fault-actions"))
    try:
        service.wait_ready()
        yield port
    finally:
        service.stop()


# ---------------------------------------------------------------- Redis lock store down


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture(scope="module")
def redis_bots(model_path: Path, actions: int, redis_server: RedisServer,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """Two servers on the same Redis: the project's resilient lock store, and Rasa's stock one."""
    work = tmp_path_factory.mktemp("redis-bots")
    stores = {
        "resilient": {"type": "bot.storage.lock_store.ResilientRedisLockStore", "url": "127.0.0.1",
                      "port": redis_server.port, "db": 1, "retry_seconds": 0.5, "max_retry_seconds": 2},
        "stock": {"type": "redis", "url": "127.0.0.1", "port": redis_server.port, "db": 2},
    }
    started = {}
    try:
        for kind, store in stores.items():
            started[kind] = start_rasa(model_path, work / kind, actions, f"rasa-{kind}",
                                       db_url=f"sqlite:///{work / kind / 'bot.db'}", extra={"lock_store": store})
        for server, _ in started.values():
            server.wait_ready()
        yield {kind: {"server": s, "url": u, "db": work / kind / "bot.db", "redis_db": stores[kind]["db"]}
               for kind, (s, u) in started.items()}
    finally:
        for server, _ in started.values():
            server.stop()


def redis_calls(port: int, command: str = "set") -> int:
    stats = redis.Redis(port=port, socket_timeout=2).info("commandstats")
    return int((stats.get(f"cmdstat_{command}") or {}).get("calls", 0))


def test_redis_down_the_project_lock_store_keeps_the_whole_service(redis_server: RedisServer,
                                                                     redis_bots: Dict[str, Any]) -> None:
    bot = redis_bots["resilient"]
    sender = f"redis-{uuid.uuid4().hex}"
    chat = Chat(bot["url"], sender)
    sent = ["why do i miss him"]
    assert answered(chat.say(sent[-1]), "why_miss")
    assert redis_calls(redis_server.port, "evalsha") > 0, "the lock store does not use Redis"

    redis_server.stop()
    try:
        # Mid-conversation: crisis first, and answers go on (not only the last-resort reply).
        sent.append("he has a gun")
        assert_handoff_first(chat.say(sent[-1]))
        sent.append("what is a trauma bond")
        assert answered(chat.say(sent[-1]), "trauma_bond")
        # A conversation that starts during the outage.
        fresh = Chat(bot["url"])
        assert_handoff_first(fresh.say("hes outside banging on the door"))
        assert answered(fresh.say("why do i miss him"), "why_miss")
        assert "Redis lock store unreachable" in log_text(bot["server"])
    finally:
        redis_server.start()

    # Back by itself: the next messages are locked in Redis again.
    deadline = time.monotonic() + 60
    while redis_calls(redis_server.port, "evalsha") == 0:
        assert time.monotonic() < deadline, "the server never went back to Redis"
        sent.append("is this chat private")
        assert customs(chat.say(sent[-1]), "answer")
        time.sleep(0.5)
    sent.append("thank you")
    assert customs(chat.say(sent[-1]), "answer")
    assert "Redis lock store is back" in log_text(bot["server"])
    # One conversation, nothing lost, in order, across the outage.
    assert sqlite_user_texts(bot["db"], sender) == sent


def test_redis_down_rasas_stock_lock_store_still_hands_off(redis_server: RedisServer,
                                                            redis_bots: Dict[str, Any]) -> None:
    """Rasa's own RedisLockStore (what deploy/endpoints.yml configured) raises on every
    message while Redis is down: the channel's last-resort reply still hands off a
    visitor in danger and tells the others plainly that something went wrong."""
    bot = redis_bots["stock"]
    chat = Chat(bot["url"])
    assert answered(chat.say("why do i miss him"), "why_miss")
    redis_server.stop()
    try:
        assert_handoff_first(chat.say("i want to kill myself"))
        turn = chat.say("what is a trauma bond")
        assert turn and turn[0]["text"] == degraded_text(), turn
        assert customs(turn, "disclaimer")
    finally:
        redis_server.start()
    deadline = time.monotonic() + 30
    while not answered(chat.say("what is a trauma bond"), "trauma_bond"):
        assert time.monotonic() < deadline, "the stock lock store did not recover"
        time.sleep(0.5)


# ---------------------------------------------------------------- SIGKILL under load

KILL_VISITORS = 30
KILL_AFTER = 150  # acknowledged messages before the kill
SCRIPT = ["hi", "why do i miss him", "what is a trauma bond", "is this chat private", "why is it so hard to leave",
          "he has a gun", "i keep blaming myself", "will i ever feel normal again", "i went back to him", "thank you"]


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.remove()


async def _visitor(session: aiohttp.ClientSession, url: str, sender: str, log: Dict[str, Any]) -> None:
    for text in SCRIPT:
        if log["stop"].is_set():
            return
        log["in_flight"][sender] = text
        try:
            async with session.post(f"{url}/webhooks/rest/webhook", json={"sender": sender, "message": text},
                                    timeout=aiohttp.ClientTimeout(total=60)) as response:
                body = await response.json(content_type=None)
                if response.status != 200 or not body:
                    log["failed"].append((sender, text, response.status))
                    return
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            log["failed"].append((sender, text, type(exc).__name__))
            return  # the server is gone: this visitor waits for it
        log["acked"][sender].append(text)
        log["count"] += 1
        del log["in_flight"][sender]


async def _load(url: str, senders: List[str], log: Dict[str, Any]) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await asyncio.gather(*(_visitor(session, url, s, log) for s in senders))


def test_sigkill_under_load_loses_no_acknowledged_message(model_path: Path, actions: int, postgres: PostgresServer,
                                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    work = tmp_path_factory.mktemp("kill")
    port = free_port()
    env = {"BOT_RATE_PER_IP": "off"}  # every visitor comes from this one address
    server, url = start_rasa(model_path, work, actions, "rasa-kill-1", db_url=postgres.url, port=port, env=env)
    restarted: Optional[Service] = None
    try:
        server.wait_ready()
        senders = [f"kill-{i}-{uuid.uuid4().hex[:10]}" for i in range(KILL_VISITORS)]
        log: Dict[str, Any] = {"acked": {s: [] for s in senders}, "in_flight": {}, "failed": [], "count": 0,
                               "stop": threading.Event()}

        def kill_when_enough() -> None:
            deadline = time.monotonic() + 300
            while log["count"] < KILL_AFTER and time.monotonic() < deadline:
                time.sleep(0.02)
            server.stop(sig=signal.SIGKILL)
            log["killed_after"] = log["count"]
            log["stop"].set()

        killer = threading.Thread(target=kill_when_enough, daemon=True)
        killer.start()
        asyncio.run(_load(url, senders, log))
        killer.join(30)
        assert "killed_after" in log and server.process.poll() is not None, "the server was not killed"
        assert log["failed"], "no request was cut by the kill"
        in_flight = dict(log["in_flight"])

        # Every acknowledged message is in the database, in order; a message in
        # flight at the kill may or may not be (it was never answered).
        stored_in_flight = 0
        for sender in senders:
            stored = [text for _, kind, text in postgres_events(postgres, sender) if kind == "user"]
            acked = log["acked"][sender]
            assert stored in (acked, acked + [in_flight.get(sender)]), (sender, stored, acked)
            stored_in_flight += len(stored) - len(acked)

        # The restarted server answers and carries on the same conversations.
        restarted, _ = start_rasa(model_path, work, actions, "rasa-kill-2", db_url=postgres.url, port=port, env=env)
        restarted.wait_ready()
        for sender in senders:
            before = postgres_events(postgres, sender)
            turn = Chat(url, sender).say("what is a trauma bond")
            assert answered(turn, "trauma_bond"), turn
            after = postgres_events(postgres, sender)
            assert [r[0] for r in after] == list(range(len(after))), "event numbers are not contiguous"
            assert after[: len(before)] == before
            assert [t for _, k, t in after if k == "user"][-1] == "what is a trauma bond"
        # Rasa's own view of a conversation: the messages from before the kill are there.
        sender = max(senders, key=lambda s: len(log["acked"][s]))
        tracker = requests.get(f"{url}/conversations/{sender}/tracker", params={"token": api_token()}, timeout=30).json()
        texts = [e.get("text") for e in tracker["events"] if e.get("event") == "user"]
        assert texts[: len(log["acked"][sender])] == log["acked"][sender]
        print(f"\nkilled after {log['killed_after']} acknowledged messages; {len(log['failed'])} requests cut; "
              f"{len(in_flight)} in flight, of which {stored_in_flight} had been stored before the kill")
    finally:
        server.stop(sig=signal.SIGKILL)
        if restarted:
            restarted.stop()


# ---------------------------------------------------------------- disk full under the SQLite file


@pytest.fixture(scope="module")
def tiny_disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 2 MB tmpfs (needs root / CAP_SYS_ADMIN)."""
    mount_point = tmp_path_factory.mktemp("tiny-disk")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill (needs root): {result.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(disk: Path) -> Path:
    """Writes a file until the disk is full."""
    filler = disk / "filler"
    chunk = b"\0" * 4096
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler


def test_disk_full_keeps_answering_and_writes_when_space_is_back(model_path: Path, actions: int, tiny_disk: Path,
                                                                  tmp_path_factory: pytest.TempPathFactory) -> None:
    work = tmp_path_factory.mktemp("disk-bot")
    db_path = tiny_disk / "bot.db"
    server, url = start_rasa(model_path, work, actions, "rasa-disk", db_url=f"sqlite:///{db_path}")
    try:
        server.wait_ready()
        sender = f"disk-{uuid.uuid4().hex}"
        chat = Chat(url, sender)
        sent = ["why do i miss him"]
        assert answered(chat.say(sent[-1]), "why_miss")
        assert sqlite_user_texts(db_path, sender) == sent

        filler = fill(tiny_disk)
        others = []
        for text, check in [("he has a gun", assert_handoff_first),
                            ("what is a trauma bond", lambda t: answered(t, "trauma_bond") or pytest.fail(str(t))),
                            ("i dont want to be here anymore", assert_handoff_first)] * 4:
            sent.append(text)
            check(chat.say(text))
            newcomer = Chat(url)  # conversations that start while the disk is full
            assert_handoff_first(newcomer.say("he hit me an hour ago"))
            others.append(newcomer.sender)
        log = log_text(server)
        assert "could not save a conversation (OperationalError)" in log, log[-3000:]
        assert sqlite_user_texts(db_path, sender) != sent, "the disk was never full for the database"

        filler.unlink()
        sent.append("thank you")
        assert customs(chat.say(sent[-1]), "answer")
        assert sqlite_user_texts(db_path, sender) == sent
        for other in others:
            assert sqlite_user_texts(db_path, other) == ["he hit me an hour ago"]
        assert "database is back: wrote" in log_text(server)
    finally:
        server.stop()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tiny_disk / "filler")


# ---------------------------------------------------------------- the lock store on its own (no Rasa server)


def test_resilient_lock_store_falls_back_and_returns(redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    from rasa.core.lock_store import LockStore
    from rasa.utils.endpoints import EndpointConfig

    from bot.storage.lock_store import ResilientRedisLockStore

    config = EndpointConfig(url="127.0.0.1", type="bot.storage.lock_store.ResilientRedisLockStore",
                            port=redis_server.port, db=3, retry_seconds=0.2, max_retry_seconds=0.4)
    store = LockStore.create(config)
    assert isinstance(store, ResilientRedisLockStore)

    async def one(conversation: str) -> None:
        async with store.lock(conversation):
            await asyncio.sleep(0.01)

    async def in_order(conversation: str) -> List[int]:
        """Three overlapping holders of one conversation's lock run one after the other."""
        order: List[int] = []

        async def hold(n: int) -> None:
            async with store.lock(conversation, wait_time_in_seconds=0.05):
                order.append(n)
                await asyncio.sleep(0.05)
                order.append(n)

        await asyncio.gather(*(hold(n) for n in range(3)))
        return order

    def is_serial(order: List[int]) -> bool:
        return all(order[i] == order[i + 1] for i in range(0, len(order), 2))

    asyncio.run(one("a"))
    assert not store.redis_down and redis_calls(redis_server.port, "evalsha") > 0
    assert is_serial(asyncio.run(in_order("b")))
    redis_server.stop()
    try:
        asyncio.run(one("a"))
        assert store.redis_down
        assert is_serial(asyncio.run(in_order("c")))
        assert not store.local.conversation_locks, "a lock in this process was not released"
    finally:
        redis_server.start()
    time.sleep(0.5)
    asyncio.run(one("a"))
    assert not store.redis_down
    assert redis.Redis(port=redis_server.port, db=3).keys("*") == []  # every lock released


def _two_servers_stores(redis_server: RedisServer, db: int) -> Tuple[Any, Any]:
    from rasa.core.lock_store import LockStore
    from rasa.utils.endpoints import EndpointConfig

    config = EndpointConfig(url="127.0.0.1", type="bot.storage.lock_store.ResilientRedisLockStore", port=redis_server.port, db=db)
    redis.Redis(port=redis_server.port, db=db).flushdb()
    return LockStore.create(config), LockStore.create(config)


def test_the_redis_lock_is_one_holder_at_a_time_across_servers_first_come_first_served(redis_server: RedisServer) -> None:
    first, second = _two_servers_stores(redis_server, 4)
    holding: List[int] = []
    order: List[int] = []

    async def hold(n: int) -> None:
        await asyncio.sleep(n * 0.002)  # arrive in order
        store = first if n % 2 else second
        async with store.lock("shared conversation", wait_time_in_seconds=0.02):
            holding.append(n)
            assert len(holding) == 1, f"two holders at once: {holding}"
            order.append(n)
            await asyncio.sleep(0.003)
            holding.remove(n)

    async def main() -> None:
        await asyncio.gather(*(hold(n) for n in range(20)))

    asyncio.run(main())
    assert order == list(range(20)), order
    client = redis.Redis(port=redis_server.port, db=4)
    assert client.keys("*") == [], "every ticket was given back"


def test_an_expired_ticket_does_not_block_the_conversation(redis_server: RedisServer) -> None:
    first, second = _two_servers_stores(redis_server, 5)
    key = first._redis_key("crashed holder")
    ticket, lowest = first._run_acquire(key, 300, "")  # taken by a server that then dies
    assert lowest == ticket

    async def after_the_crash() -> float:
        start = time.monotonic()
        async with second.lock("crashed holder", lock_lifetime=5, wait_time_in_seconds=0.05):
            return time.monotonic() - start

    waited = asyncio.run(after_the_crash())
    assert 0.2 < waited < 2.0, waited


def test_a_waiting_ticket_outlives_a_crashed_holder_with_the_same_lifetime(redis_server: RedisServer) -> None:
    """A server that waits behind a dead server's ticket is alive: its own ticket must not expire meanwhile.

    Both tickets have the same lifetime and the waiter came a little later,
    so the dead ticket expires first; the waiter, checking at longer and
    longer intervals, must then hold the lock, not get a LockError (the
    visitor would only see "something went wrong").
    """
    first, second = _two_servers_stores(redis_server, 7)
    key = first._redis_key("crashed holder")
    lifetime = 0.6
    ticket, lowest = first._run_acquire(key, int(lifetime * 1000), "")  # taken by a server that then dies
    assert lowest == ticket

    async def after_the_crash() -> float:
        await asyncio.sleep(0.1)  # the visitor's retry reaches the other server
        start = time.monotonic()
        async with second.lock("crashed holder", lock_lifetime=lifetime, wait_time_in_seconds=1):
            return time.monotonic() - start

    waited = asyncio.run(after_the_crash())
    assert 0.4 < waited < 1.5, waited
    assert redis.Redis(port=redis_server.port, db=7).keys("*") == [], "the ticket was given back"


def test_a_waiter_whose_ticket_ran_out_anyway_takes_a_new_one(redis_server: RedisServer) -> None:
    """If the waiting server stalled for a whole lifetime, it queues again instead of failing the turn."""
    first, second = _two_servers_stores(redis_server, 8)
    client = redis.Redis(port=redis_server.port, db=8)
    key = first._redis_key("stalled waiter")
    holder, _ = first._run_acquire(key, 10_000, "")

    async def stall_then_release() -> None:
        await asyncio.sleep(0.2)
        waiting = [f for f in client.hkeys(key) if f.startswith(b"t") and f != f"t{holder}".encode()]
        assert waiting, "the second server is not waiting"
        client.hdel(key, *waiting)  # as if its ticket had run out during a stall
        await asyncio.sleep(0.1)
        first._release(key, holder)

    async def waiter() -> bool:
        async with second.lock("stalled waiter", lock_lifetime=5, wait_time_in_seconds=0.05):
            return True

    async def main() -> bool:
        got, _ = await asyncio.gather(waiter(), stall_then_release())
        return got

    assert asyncio.run(main())
    assert client.keys("*") == [], "every ticket was given back"


def test_redis_holds_no_conversation_id_and_two_round_trips_a_message(redis_server: RedisServer) -> None:
    first, _ = _two_servers_stores(redis_server, 6)
    client = redis.Redis(port=redis_server.port, db=6)
    seen: List[bytes] = []

    async def one() -> None:
        async with first.lock("jane.doe@example.com"):
            seen.extend(client.keys("*"))

    asyncio.run(one())  # the scripts are loaded on first use
    calls = redis_calls(redis_server.port, "evalsha") + redis_calls(redis_server.port, "eval")
    asyncio.run(one())
    assert redis_calls(redis_server.port, "evalsha") + redis_calls(redis_server.port, "eval") - calls == 2
    assert seen and not any(b"jane" in k or b"example" in k for k in seen), seen
