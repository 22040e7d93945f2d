"""Storage: personal details never reach the database or the logs; purge and erasure; a database outage."""
from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa
import yaml

from bot.redact import default_redactor
from bot.storage import db, retention
from bot.storage.schema import conversations, events
from rasa.shared.core.events import SessionStarted

from bot.storage.tracker_store import RedactingTrackerStore, conversation_id
from tests.conftest import DATA, PROJECT, TEST_SECRET, WEB_PORT, Chat, customs

PII = yaml.safe_load((DATA / "pii_cases.yml").read_text(encoding="utf-8"))


def secrets_found(blob: bytes, secrets: List[str]) -> List[str]:
    """The secrets present in raw bytes: as written, JSON-escaped, and (numbers) as bare digits."""
    found = []
    text = blob.decode("utf-8", errors="ignore")
    for secret in secrets:
        variants = {secret, json.dumps(secret, ensure_ascii=True)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
        digits = "".join(ch for ch in secret if ch.isdigit())
        if len(digits) >= 7:
            variants.add(digits)
        for variant in variants:
            # Whole words only, so that the name "ana" is not found inside "banana" or "mañana";
            # and not the digits after a decimal point, so that the ZIP code 45402 is not found in an
            # event's timestamp 1764623345.45402 (about 60 timestamps a run end in five digits).
            if re.search(r"(?<!\w)(?<!\d\.)" + re.escape(variant) + r"(?!\w)", text):
                found.append(secret)
                break
    return found


def test_secrets_are_found_as_written_and_not_inside_other_numbers() -> None:
    assert secrets_found(b'{"text": "i moved to Dayton OH 45402."}', ["45402"]) == ["45402"]
    assert secrets_found(b'{"text": "call 4155550132"}', ["(415) 555-0132"]) == ["(415) 555-0132"]
    assert secrets_found(b'{"text": "Ana"}', ["Ana"]) == ["Ana"]
    assert secrets_found(b'{"timestamp": 1764623345.45402, "id": "a45402f"}', ["45402"]) == []
    assert secrets_found(b'{"text": "bananas"}', ["ana"]) == []


def all_secrets() -> List[str]:
    return [s for case in PII["cases"] for s in case["secrets"]]


# ------------------------------------------------------------------ the redactor on its own


def test_the_pii_file_is_big_enough() -> None:
    assert len(PII["cases"]) >= 150
    kinds = {k for case in PII["cases"] for k in case["kinds"]}
    assert kinds >= {"phone", "email", "address", "zip", "url", "ip", "dob", "card", "ssn", "name"}


@pytest.mark.parametrize("case", PII["cases"], ids=lambda c: c["text"][:40])
def test_every_planted_detail_is_redacted(case: Dict[str, Any]) -> None:
    redacted = default_redactor().redact(case["text"])
    assert secrets_found(redacted.encode(), case["secrets"]) == [], redacted


def ordinary_messages() -> List[str]:
    texts = list(PII["ordinary"])
    texts += [c["text"] for c in yaml.safe_load((DATA / "dev_cases.yml").read_text())["cases"]]
    for path in sorted((PROJECT / "data/nlu").rglob("*.yml")):
        for block in yaml.safe_load(path.read_text())["nlu"]:
            texts += [line[2:].strip() for line in block["examples"].splitlines() if line.strip().startswith("- ")]
    return texts


def test_fewer_than_5_percent_of_ordinary_messages_are_altered() -> None:
    texts = ordinary_messages()
    altered = [t for t in texts if default_redactor().redact(t) != t]
    assert len(texts) > 3000
    assert len(altered) / len(texts) < 0.05, altered[:20]


def test_public_hotline_numbers_are_kept() -> None:
    assert default_redactor().redact("i called 1-800-799-7233 and texted 88788") == "i called 1-800-799-7233 and texted 88788"


# ------------------------------------------------------------------ the tracker store in-process


@pytest.fixture
def store(tmp_path: Path) -> RedactingTrackerStore:
    from rasa.shared.core.domain import Domain

    domain = Domain.load(str(PROJECT / "domain"))
    return RedactingTrackerStore(domain=domain, db_url=f"sqlite:///{tmp_path / 'bot.db'}", purge_interval_hours=0)


def _tracker(sender: str, texts: List[str], domain: Any) -> Any:
    from rasa.shared.core.events import ActionExecuted, SessionStarted, UserUttered
    from rasa.shared.core.trackers import DialogueStateTracker

    tracker = DialogueStateTracker(sender, domain.slots)
    tracker.update(ActionExecuted("action_session_start"))
    tracker.update(SessionStarted())
    for text in texts:
        tracker.update(
            UserUttered(text, {"name": "why_miss", "confidence": 0.9}, [], {"text": text, "intent": {"name": "why_miss"}},
                        metadata={"ip": "203.0.113.9", "user_agent": "Mozilla/5.0 secret-agent"})
        )
        tracker.update(ActionExecuted("action_listen"))
    return tracker


def test_raw_database_bytes_hold_no_planted_detail(store: RedactingTrackerStore, tmp_path: Path) -> None:
    sender = "jane.doe@example.com"  # a sender id that is itself a personal detail
    texts = [c["text"] for c in PII["cases"]]
    asyncio.run(store.save(_tracker(sender, texts, store.domain)))
    blob = b"".join(p.read_bytes() for p in tmp_path.glob("bot.db*"))
    assert secrets_found(blob, all_secrets() + [sender, "203.0.113.9", "secret-agent"]) == []
    retrieved = asyncio.run(store.retrieve(sender))
    assert len([e for e in retrieved.events if e.type_name == "user"]) == len(texts)


def test_only_new_events_are_written_and_order_is_kept(store: RedactingTrackerStore) -> None:
    tracker = _tracker("s1", ["one", "two"], store.domain)
    asyncio.run(store.save(tracker))
    from rasa.shared.core.events import UserUttered

    tracker.update(UserUttered("three", {"name": "greet", "confidence": 1.0}))
    asyncio.run(store.save(tracker))
    with store.engine.connect() as connection:
        rows = connection.execute(sa.select(events.c.seq, events.c.text).order_by(events.c.seq)).all()
    assert [r.seq for r in rows] == list(range(len(rows)))
    assert [r.text for r in rows if r.text] == ["one", "two", "three"]


def test_erase_removes_every_event_of_the_conversation(store: RedactingTrackerStore) -> None:
    asyncio.run(store.save(_tracker("keep", ["stay"], store.domain)))
    asyncio.run(store.save(_tracker("gone", ["bye 1", "bye 2"], store.domain)))
    assert store.erase("gone") > 0
    with store.engine.connect() as connection:
        texts = [r[0] for r in connection.execute(sa.select(events.c.text)) if r[0]]
    assert texts == ["stay"]
    assert asyncio.run(store.retrieve("gone")) is None


def test_purge_removes_exactly_the_old_conversations(store: RedactingTrackerStore) -> None:
    for sender in ("old-1", "old-2", "recent"):
        asyncio.run(store.save(_tracker(sender, ["hello"], store.domain)))
    now = time.time()
    with store.engine.begin() as connection:
        for sender, age_days in (("old-1", 45), ("old-2", 31), ("recent", 29)):
            connection.execute(
                sa.update(conversations)
                .where(conversations.c.id == conversation_id(sender, store.key))
                .values(last_active=now - age_days * 86400)
            )
    assert retention.purge(30, store.url, now=now) == 2
    with store.engine.connect() as connection:
        left = {r[0] for r in connection.execute(sa.select(conversations.c.id))}
        orphan_events = connection.execute(sa.select(sa.func.count()).select_from(events).where(events.c.conversation_id.notin_(left))).scalar()
    assert left == {conversation_id("recent", store.key)}
    assert orphan_events == 0


def test_a_database_that_is_down_keeps_conversations_in_memory_until_it_is_back(tmp_path: Path) -> None:
    from rasa.shared.core.domain import Domain

    domain = Domain.load(str(PROJECT / "domain"))
    blocker = tmp_path / "db"
    blocker.write_text("a file where the database folder should be: SQLite cannot open it")
    url = f"sqlite:///{blocker / 'bot.db'}"
    store = RedactingTrackerStore(domain=domain, db_url=url, purge_interval_hours=0)
    assert not store._ready
    asyncio.run(store.save(_tracker("offline", ["kept in memory"], domain)))
    assert asyncio.run(store.retrieve("offline")) is not None  # the bot still has the conversation
    blocker.unlink()  # the database comes back
    asyncio.run(store.save(_tracker("another", ["hi"], domain)))  # ... and what was pending is written
    with store.engine.connect() as connection:
        texts = [r[0] for r in connection.execute(sa.select(events.c.text)) if r[0]]
    assert "kept in memory" in texts and "hi" in texts
    assert asyncio.run(store.retrieve("offline")) is not None


def _stored_rows(store: RedactingTrackerStore, sender: str) -> List[Any]:
    with store.engine.connect() as connection:
        return connection.execute(
            sa.select(events.c.seq, events.c.type, events.c.text)
            .where(events.c.conversation_id == conversation_id(sender, store.key))
            .order_by(events.c.seq)
        ).all()


def _new_session(tracker: Any) -> None:
    from rasa.shared.core.events import ActionExecuted, SessionStarted

    tracker.update(ActionExecuted("action_session_start"))
    tracker.update(SessionStarted())
    tracker.update(ActionExecuted("action_listen"))


def _say(tracker: Any, text: str) -> None:
    from rasa.shared.core.events import ActionExecuted, UserUttered

    tracker.update(UserUttered(text, {"name": "greet", "confidence": 1.0}))
    tracker.update(ActionExecuted("action_listen"))


def test_rasa_gets_the_current_session_and_the_database_keeps_them_all(store: RedactingTrackerStore) -> None:
    tracker = _tracker("sessions", ["first session"], store.domain)
    asyncio.run(store.save(tracker))
    for session in range(3):
        tracker = asyncio.run(store.retrieve("sessions"))
        _new_session(tracker)
        _say(tracker, f"session {session + 2}")
        asyncio.run(store.save(tracker))
    current = asyncio.run(store.retrieve("sessions"))
    texts = [e.text for e in current.events if e.type_name == "user"]
    assert texts == ["session 4"], texts
    assert isinstance(current.events[0], SessionStarted)
    full = asyncio.run(store.retrieve_full_tracker("sessions"))
    assert [e.text for e in full.events if e.type_name == "user"] == ["first session", "session 2", "session 3", "session 4"]
    rows = _stored_rows(store, "sessions")
    assert [r.seq for r in rows] == list(range(len(rows)))
    assert [r.text for r in rows if r.type == "user"] == ["first session", "session 2", "session 3", "session 4"]
    # A second process (nothing in memory) reads the same current session from the database.
    other = RedactingTrackerStore(domain=store.domain, db_url=store.url, purge_interval_hours=0)
    assert [e.text for e in asyncio.run(other.retrieve("sessions")).events if e.type_name == "user"] == ["session 4"]


def test_two_servers_writing_one_conversation_lose_nothing(store: RedactingTrackerStore) -> None:
    """Round-robin between servers: each notices the other's writes and appends after them."""
    other = RedactingTrackerStore(domain=store.domain, db_url=store.url, purge_interval_hours=0)
    asyncio.run(store.save(_tracker("shared", ["turn 0"], store.domain)))
    expected = ["turn 0"]
    for i in range(1, 9):
        server = other if i % 2 else store
        tracker = asyncio.run(server.retrieve("shared"))
        # Each server's copy is brought up to date with the other's turns.
        assert [e.text for e in tracker.events if e.type_name == "user"] == expected
        _say(tracker, f"turn {i}")
        asyncio.run(server.save(tracker))
        expected.append(f"turn {i}")
    # A stale copy written without reading first (a lock that expired): still appended, never overwritten.
    stale = asyncio.run(store.retrieve("shared"))
    fresh = asyncio.run(other.retrieve("shared"))
    _say(fresh, "turn 9")
    asyncio.run(other.save(fresh))
    _say(stale, "turn 10")
    asyncio.run(store.save(stale))
    rows = _stored_rows(store, "shared")
    assert [r.seq for r in rows] == list(range(len(rows)))
    assert [r.text for r in rows if r.type == "user"] == expected + ["turn 9", "turn 10"]
    with store.engine.connect() as connection:
        count, turns = connection.execute(
            sa.select(conversations.c.event_count, conversations.c.turns).where(conversations.c.id == conversation_id("shared", store.key))
        ).one()
    assert (count, turns) == (len(rows), 11)


def test_a_new_conversation_is_written_once_with_its_first_message(store: RedactingTrackerStore) -> None:
    tracker = asyncio.run(store.get_or_create_tracker("newcomer"))
    assert _stored_rows(store, "newcomer") == []  # Rasa's empty placeholder is not written
    _new_session(tracker)
    _say(tracker, "hello there")
    asyncio.run(store.save(tracker))
    rows = _stored_rows(store, "newcomer")
    assert [r.type for r in rows][:2] == ["action", "action"] and [r.text for r in rows if r.text] == ["hello there"]
    assert [r.seq for r in rows] == list(range(len(rows)))


# ------------------------------------------------------------------ through the REST channel


@pytest.mark.slow
def test_pii_sent_through_the_rest_channel_never_reaches_the_database_or_the_logs(bot_url: str, servers: Dict[str, Any]) -> None:
    for i, case in enumerate(PII["cases"]):
        Chat(bot_url, f"pii-{i}").say(case["text"])
    work: Path = servers["work"]
    blob = b"".join(p.read_bytes() for p in work.glob("bot.db*"))
    assert blob, "the test server writes its database into its work folder"
    assert secrets_found(blob, all_secrets()) == []
    logs = b"".join(p.read_bytes() for p in work.glob("*.log"))
    # The servers log their own addresses; a port such as :45402 is not the ZIP code 45402.
    for port in (servers["action_port"], urlsplit(bot_url).port, WEB_PORT):
        logs = logs.replace(f":{port}".encode(), b":port")
    assert secrets_found(logs, all_secrets()) == []


@pytest.mark.slow
def test_the_bot_still_understands_the_original_message(chat: Chat) -> None:
    turn = chat.say("my ex Tyler Brooks is outside 14 Elm Street right now banging on the door, call (415) 555-0132")
    assert customs(turn, "crisis_handoff")


@pytest.mark.slow
def test_delete_this_conversation_erases_it_and_says_so(bot_url: str, servers: Dict[str, Any]) -> None:
    sender = f"erase-{uuid.uuid4().hex}"
    chat = Chat(bot_url, sender)
    chat.say("why do i miss him")
    chat.say("my name is Ana")
    engine = sa.create_engine(f"sqlite:///{servers['work'] / 'bot.db'}")
    cid = conversation_id(sender, TEST_SECRET.encode())
    with engine.connect() as connection:
        assert connection.execute(sa.select(sa.func.count()).select_from(events).where(events.c.conversation_id == cid)).scalar() > 0
    reply = chat.say("please delete this conversation")
    assert "deleted this conversation" in reply[0]["text"]
    with engine.connect() as connection:
        assert connection.execute(sa.select(sa.func.count()).select_from(events).where(events.c.conversation_id == cid)).scalar() == 0
        assert connection.execute(sa.select(sa.func.count()).select_from(conversations).where(conversations.c.id == cid)).scalar() == 0
    # the next message starts a new conversation (with the disclaimer again)
    assert customs(chat.say("hello"), "disclaimer")


def test_events_are_stored_as_json_that_reads_back_the_same() -> None:
    import json as std_json
    import math

    from bot.storage.tracker_store import _to_json

    event = {"event": "user", "text": "¿qué? 😢", "parse_data": {"intent": {"name": "why_miss", "confidence": 0.123456789012345}}, "n": None}
    assert std_json.loads(_to_json(event)) == event
    assert std_json.loads(_to_json({"big": 10 ** 30}))["big"] == 10 ** 30  # beyond ujson's 64 bits
    assert math.isnan(std_json.loads(_to_json({"x": float("nan")}))["x"])
    assert "object" in _to_json({"odd": object()})
