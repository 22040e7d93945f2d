"""The server's secret key: signs review sessions and keys the hash of conversation ids.

BOT_SECRET_KEY when set (several servers must share it), otherwise a random
key created once in var/secret.key, readable by its owner only.
"""
from __future__ import annotations

import os

from bot import paths


def secret_key() -> bytes:
    configured = os.environ.get("BOT_SECRET_KEY")
    if configured:
        return configured.encode("utf-8")
    path = paths.var_dir() / "secret.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process created it first
            return path.read_bytes().strip()
        with os.fdopen(fd, "wb") as handle:
            handle.write(os.urandom(32).hex().encode())
    return path.read_bytes().strip()


def api_token() -> str:
    """The token that protects Rasa's HTTP API (model swaps, trackers): BOT_API_TOKEN or var/api.token."""
    configured = os.environ.get("BOT_API_TOKEN")
    if configured:
        return configured
    path = paths.var_dir() / "api.token"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_text().strip()
        with os.fdopen(fd, "w") as handle:
            handle.write(os.urandom(24).hex())
    return path.read_text().strip()
