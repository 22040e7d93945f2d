"""Starts and stops the project's processes: the Rasa server, the action server, the web app.

Used by ``python -m bot run`` (``make run``), by the tests and the benchmark,
so that all of them start the bot the same way.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from bot import paths
from bot.keys import api_token

DEFAULT_HOST = "127.0.0.1"
RASA_PORT = 5005
ACTIONS_PORT = 5055
WEB_PORT = 8080


@dataclass
class Service:
    """One child process with its log file."""

    name: str
    command: List[str]
    health_url: str
    env: Dict[str, str] = field(default_factory=dict)
    process: Optional[subprocess.Popen] = None
    log_path: Optional[Path] = None

    def start(self, log_dir: Optional[Path] = None) -> "Service":
        log_dir = Path(log_dir) if log_dir else paths.var_dir() / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{self.name}.log"
        env = {**os.environ, **self.env}
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command,
                cwd=str(paths.project_dir()),
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def wait_ready(self, timeout: float = 180.0) -> "Service":
        """Waits until the health URL answers; raises with the log's tail if it never does."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with code {self.process.returncode}:\n{self.log_tail()}")
            if is_up(self.health_url):
                return self
            time.sleep(0.5)
        raise TimeoutError(f"{self.name} did not start within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            return
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=timeout)

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def is_up(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status < 500
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def python() -> str:
    return sys.executable


def allowed_origins(env: Optional[Dict[str, str]] = None) -> List[str]:
    """Web origins allowed to call the Rasa server (the sites that embed the widget).

    ``env`` (the server's own environment, if given) wins over this process's.
    """
    default = f"http://127.0.0.1:{WEB_PORT} http://localhost:{WEB_PORT}"
    raw = (env or {}).get("BOT_ALLOWED_ORIGINS") or os.environ.get("BOT_ALLOWED_ORIGINS", default)
    return [o for o in raw.replace(",", " ").split() if o]


def rasa_service(
    model: Path,
    port: int = RASA_PORT,
    host: str = DEFAULT_HOST,
    env: Optional[Dict[str, str]] = None,
    endpoints: str = "endpoints.yml",
    credentials: str = "credentials.yml",
    extra_args: Optional[List[str]] = None,
    name: str = "rasa",
) -> Service:
    """The Rasa server with the project's channels, on ``host:port``."""
    command = [
        python(), "-m", "bot.rasa_main", "run",
        "--model", str(model),
        "--endpoints", endpoints,
        "--credentials", credentials,
        "--port", str(port),
        "--interface", host,
        "--cors", *allowed_origins(env),
        # Rasa's HTTP API (model swaps by promote, trackers) only with the token.
        "--enable-api", "--auth-token", api_token(),
        *(extra_args or []),
    ]
    # A queue for bursts of new connections (Sanic's default of 100 overflowed
    # under the soak test's arrivals).
    return Service(name, command, f"http://{host}:{port}/webhooks/rest/", env={"SANIC_BACKLOG": "1024", **(env or {})})


def actions_service(port: int = ACTIONS_PORT, env: Optional[Dict[str, str]] = None) -> Service:
    """The Rasa SDK action server with the project's ``actions`` package."""
    command = [python(), "-m", "rasa_sdk", "--actions", "actions", "--port", str(port)]
    return Service("actions", command, f"http://{DEFAULT_HOST}:{port}/health", env=env or {})


def web_service(port: int = WEB_PORT, host: str = DEFAULT_HOST, env: Optional[Dict[str, str]] = None) -> Service:
    """The web app (widget files, demo page, review) served by waitress."""
    command = [
        python(), "-m", "waitress",
        "--host", host, "--port", str(port),
        "--threads", "8",
        "--call", "bot.web:create_app",
    ]
    return Service("web", command, f"http://{host}:{port}/healthz", env=env or {})
