"""The same storage guarantees on a real PostgreSQL server, and a database that fails and comes back."""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from bot.storage.tracker_store import conversation_id
from tests.conftest import TEST_SECRET, Chat, customs, free_port, running_bot
from tests.postgres import PostgresServer
from tests.test_storage import PII, secrets_found

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer(free_port())
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture(scope="module")
def pg_bot(postgres: PostgresServer, model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """A Rasa server on PostgreSQL, started while PostgreSQL is still DOWN."""
    with running_bot(model_path, tmp_path_factory.mktemp("pg-bot"), name="rasa-pg", db_url=postgres.url) as bot:
        yield bot


def stored_user_texts(postgres: PostgresServer, sender: str) -> List[str]:
    cid = conversation_id(sender, TEST_SECRET.encode())
    out = postgres.psql(
        "SELECT coalesce(json_agg(text ORDER BY seq), '[]') FROM events "
        f"WHERE conversation_id = '{cid}' AND type = 'user'"
    )
    return json.loads(out.strip() or "[]")


def test_down_at_startup_then_up_then_away_mid_conversation(postgres: PostgresServer, pg_bot: Dict[str, Any]) -> None:
    sender = f"outage-{uuid.uuid4().hex}"
    chat = Chat(pg_bot["url"], sender)
    # 1. PostgreSQL is down since before the server started: the bot answers, crisis included.
    assert customs(chat.say("why do i miss him"), "answer")
    assert customs(chat.say("he has a gun"), "crisis_handoff")
    # 2. PostgreSQL comes up: the next message writes everything kept in memory.
    postgres.start()
    assert customs(chat.say("what is a trauma bond"), "answer")
    assert stored_user_texts(postgres, sender) == ["why do i miss him", "he has a gun", "what is a trauma bond"]
    # 3. PostgreSQL goes away mid-conversation: the bot keeps answering and keeps the messages.
    postgres.stop("immediate")
    assert customs(chat.say("i dont want to be here anymore"), "crisis_handoff")
    assert customs(chat.say("is this chat private"), "answer")
    # 4. ... and it comes back: nothing acknowledged was lost, the order is kept.
    postgres.start()
    assert customs(chat.say("thank you"), "answer")
    assert stored_user_texts(postgres, sender) == [
        "why do i miss him",
        "he has a gun",
        "what is a trauma bond",
        "i dont want to be here anymore",
        "is this chat private",
        "thank you",
    ]


def test_postgres_tables_hold_no_planted_detail(postgres: PostgresServer, pg_bot: Dict[str, Any]) -> None:
    for i, case in enumerate(PII["cases"]):
        Chat(pg_bot["url"], f"pg-pii-{i}").say(case["text"])
    dump = postgres.psql("SELECT row_to_json(e)::text FROM events e") + postgres.psql(
        "SELECT row_to_json(c)::text FROM conversations c"
    )
    assert dump.count("\n") > len(PII["cases"])
    secrets = [s for case in PII["cases"] for s in case["secrets"]]
    assert secrets_found(dump.encode(), secrets) == []


def test_delete_this_conversation_on_postgres(postgres: PostgresServer, pg_bot: Dict[str, Any]) -> None:
    sender = f"erase-{uuid.uuid4().hex}"
    chat = Chat(pg_bot["url"], sender)
    chat.say("why do i miss him")
    assert stored_user_texts(postgres, sender)
    chat.say("delete this conversation")
    assert stored_user_texts(postgres, sender) == []
