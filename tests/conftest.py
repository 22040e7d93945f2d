"""Shared fixtures: a real Rasa server (REST + socket.io) with the current model.

Tests talk to the bot through its real interfaces. The server fixtures are
session-wide: starting Rasa takes ~20 s, so one server serves every test.
"""
from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest
import requests
import yaml

os.environ.setdefault("RASA_TELEMETRY_ENABLED", "false")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["BOT_SECRET_KEY"] = "test-secret-key-not-for-production"  # servers started by tests inherit it

from bot import paths  # noqa: E402
from bot.local_services import free_port  # noqa: E402,F401  (the tests import it from here)

PROJECT = paths.project_dir()
DATA = Path(__file__).parent / "data"


TEST_SECRET = "test-secret-key-not-for-production"


def write_endpoints(path: Path, action_port: int, extra: Dict[str, Any] = None, db_url: str = "") -> Path:
    """An endpoints file for a test server: its own action port and its own database."""
    db_url = db_url or f"sqlite:///{path.parent / 'bot.db'}"
    config: Dict[str, Any] = {
        "action_endpoint": {"url": f"http://127.0.0.1:{action_port}/webhook"},
        "tracker_store": {"type": "bot.storage.tracker_store.RedactingTrackerStore", "db_url": db_url},
    }
    config.update(extra or {})
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@contextlib.contextmanager
def running_bot(
    model_path: Path, work: Path, name: str = "rasa", env: Optional[Dict[str, str]] = None, db_url: str = ""
) -> Iterator[Dict[str, Any]]:
    """An action server and a Rasa server of their own on free ports, writing into ``work``; stopped after."""
    from bot.server import actions_service, rasa_service

    action_port, port = free_port(), free_port()
    endpoints = write_endpoints(work / "endpoints.yml", action_port, db_url=db_url)
    actions = actions_service(port=action_port).start(work)
    rasa = rasa_service(model_path, port=port, endpoints=str(endpoints), env=env, name=name).start(work)
    try:
        actions.wait_ready()
        rasa.wait_ready()
        yield {"url": f"http://127.0.0.1:{port}", "rasa": rasa, "actions": actions, "action_port": action_port, "work": work}
    finally:
        rasa.stop()
        actions.stop()


@pytest.fixture(scope="session")
def model_path() -> Path:
    from bot.training import ensure_model

    return ensure_model(log=lambda _: None)


WEB_PORT = free_port()  # known before the Rasa server starts: it must allow the web origin


@pytest.fixture(scope="session")
def servers(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """The action server and the Rasa server, on free ports."""
    env = {"BOT_ALLOWED_ORIGINS": f"http://127.0.0.1:{WEB_PORT}"}
    with running_bot(model_path, tmp_path_factory.mktemp("servers"), env=env) as bot:
        yield bot


def shared_db_url(work: Path) -> str:
    """The SQLite database the test Rasa server writes (the web app reads the same)."""
    return f"sqlite:///{work / 'bot.db'}"


@pytest.fixture(scope="session")
def shared_db(servers: Dict[str, Any]) -> str:
    """The database URL of the shared test Rasa server."""
    return shared_db_url(servers["work"])


@pytest.fixture(scope="session")
def web_url(bot_url: str, shared_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The web app (demo page with the widget), talking to the test Rasa server."""
    from bot.server import web_service

    work = tmp_path_factory.mktemp("web")
    env = {
        "BOT_PUBLIC_RASA_URL": bot_url,
        "BOT_EXIT_URL": f"http://127.0.0.1:{WEB_PORT}/healthz",
        "BOT_DB_URL": shared_db,
    }
    web = web_service(port=WEB_PORT, env=env).start(work)
    try:
        web.wait_ready(60)
        yield f"http://127.0.0.1:{WEB_PORT}"
    finally:
        web.stop()


@pytest.fixture(scope="session")
def bot_url(servers: Dict[str, Any]) -> str:
    return servers["url"]


class Chat:
    """One conversation over the REST channel."""

    def __init__(self, base_url: str, sender: str = "") -> None:
        self.url = f"{base_url}/webhooks/rest/webhook"
        self.sender = sender or f"test-{uuid.uuid4().hex}"

    def say(self, text: str, **extra: Any) -> List[Dict[str, Any]]:
        response = requests.post(self.url, json={"sender": self.sender, "message": text, **extra}, timeout=60)
        assert response.status_code == 200, response.text
        return response.json()


def customs(messages: List[Dict[str, Any]], kind: str = "") -> List[Dict[str, Any]]:
    """The ``custom`` payloads of a turn (of one ``type`` if given)."""
    found = [m["custom"] for m in messages if isinstance(m.get("custom"), dict)]
    return [c for c in found if not kind or c.get("type") == kind]


@pytest.fixture
def chat(bot_url: str) -> Chat:
    return Chat(bot_url)


@pytest.fixture(scope="session")
def crisis_cases() -> Dict[str, List[Dict[str, Any]]]:
    return yaml.safe_load((DATA / "crisis_cases.yml").read_text(encoding="utf-8"))
