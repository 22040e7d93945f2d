"""A real PostgreSQL server (Debian's package) for the tests, started in a temporary folder.

PostgreSQL refuses to run as root, so the server runs as the ``postgres``
user; it listens on 127.0.0.1 on a free port and is removed afterwards.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional

import pytest


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        pytest.fail("PostgreSQL is missing: run scripts/system-deps.sh (make test does)")
    return found[-1]


def _as_postgres(args: list) -> list:
    if os.geteuid() != 0:
        return args
    runuser = shutil.which("runuser")
    return [runuser, "-u", "postgres", "--", *args] if runuser else ["su", "postgres", "-c", " ".join(args)]


class PostgresServer:
    """initdb + pg_ctl start/stop on a port; ``url`` is a SQLAlchemy URL."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.root = Path(tempfile.mkdtemp(prefix="bot-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        os.chmod(self.root, 0o777)
        subprocess.run(
            _as_postgres([_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
            check=True,
            stdout=subprocess.DEVNULL,
        )

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> "PostgresServer":
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run(
            _as_postgres([_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start"]),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(
            _as_postgres([_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"]),
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def psql(self, sql: str) -> str:
        result = subprocess.run(
            [_bin("psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-At", "-c", sql],
            check=True,
            capture_output=True,
            text=True,
        )
        return result.stdout

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
