"""Real PostgreSQL, Redis and nginx (Debian's packages), each in a temporary folder on 127.0.0.1.

Used by the tests, the scale-out test and ``make bench`` so that they run the
same engines as production, never imitations. PostgreSQL refuses to run as
root, so as root it runs as the ``postgres`` user.
"""
from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Sequence


class MissingPackage(RuntimeError):
    """A Debian package is not installed (scripts/system-deps.sh installs them)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise MissingPackage("PostgreSQL is missing: run scripts/system-deps.sh (make test does)")
    return found[-1]


def _as_postgres(args: List[str]) -> List[str]:
    if os.geteuid() != 0:
        return args
    runuser = shutil.which("runuser")
    return [runuser, "-u", "postgres", "--", *args] if runuser else ["su", "postgres", "-c", " ".join(args)]


class PostgresServer:
    """initdb + pg_ctl start/stop on a port; ``url`` is a SQLAlchemy URL."""

    def __init__(self, port: Optional[int] = None, max_connections: int = 200, durable: bool = False) -> None:
        self.port = port or free_port()
        self.max_connections = max_connections
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="bot-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        os.chmod(self.root, 0o777)
        subprocess.run(
            _as_postgres([_pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
            check=True,
            stdout=subprocess.DEVNULL,
        )

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> "PostgresServer":
        # Tests do not need their commits on disk (fsync off: faster); the benchmark
        # measures PostgreSQL as deployed (durable=True: every commit flushed).
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                   f"-c fsync={'on' if self.durable else 'off'} -c max_connections={self.max_connections}")
        subprocess.run(
            _as_postgres([_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start"]),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(
            _as_postgres([_pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"]),
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def psql(self, sql: str) -> str:
        result = subprocess.run(
            [_pg_bin("psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-At", "-c", sql],
            check=True,
            capture_output=True,
            text=True,
        )
        return result.stdout

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


class _Daemon:
    """A foreground server process in its own session, stopped with its children."""

    name = "daemon"

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=f"bot-{self.name}-"))
        self.process: Optional[subprocess.Popen] = None

    def _spawn(self, command: Sequence[str], port: int) -> None:
        log = open(self.root / f"{self.name}.log", "ab")
        self.process = subprocess.Popen(list(command), stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True, cwd=str(self.root))
        try:
            wait_for_port(port)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"{self.name} did not start: {(self.root / f'{self.name}.log').read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class RedisServer(_Daemon):
    """redis-server with no persistence, on a free port."""

    name = "redis"

    def __init__(self, port: Optional[int] = None) -> None:
        super().__init__()
        self.port = port or free_port()

    def start(self) -> "RedisServer":
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not Path(binary).exists():
            raise MissingPackage("Redis is missing: run scripts/system-deps.sh (make test does)")
        self._spawn([binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                     "--appendonly", "no", "--dir", str(self.root)], self.port)
        return self


class NginxServer(_Daemon):
    """nginx in the foreground with a generated config over upstream ports.

    ``balance`` is "round-robin" (any server takes any message) or
    "conversation": as in deploy/nginx/bot.conf, a consistent hash of the
    X-Conversation-Id header sends a conversation's messages to one server,
    which then has its tracker cached instead of reading what another
    server wrote. Requests without the header are spread at random.
    """

    name = "nginx"

    def __init__(self, upstream_ports: Sequence[int], port: Optional[int] = None,
                 balance: str = "round-robin") -> None:
        super().__init__()
        if balance not in ("round-robin", "conversation"):
            raise ValueError(f"unknown balance {balance!r}")
        self.port = port or free_port()
        self.upstream_ports = list(upstream_ports)
        self.balance = balance

    def main_context(self) -> str:
        """nginx.conf up to the inside of ``http {``: everything nginx writes goes below ``root``."""
        root = self.root
        return f"""daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  client_body_temp_path {root}/body;
  proxy_temp_path {root}/proxy;
  fastcgi_temp_path {root}/fastcgi;
  uwsgi_temp_path {root}/uwsgi;
  scgi_temp_path {root}/scgi;"""

    def config(self) -> str:
        servers = "\n".join(f"    server 127.0.0.1:{p} max_fails=1 fail_timeout=5s;" for p in self.upstream_ports)
        conversation_map = affinity = ""
        if self.balance == "conversation":
            conversation_map = """  map $http_x_conversation_id $bot_conversation {
    "" $request_id;
    default $http_x_conversation_id;
  }
"""
            affinity = "    hash $bot_conversation consistent;\n"
        return f"""{self.main_context()}
  access_log off;
  client_max_body_size 64k;
{conversation_map}  upstream rasa {{
{affinity}{servers}
    keepalive 32;
  }}
  server {{
    listen 127.0.0.1:{self.port};
    location /webhooks/ {{
      proxy_pass http://rasa;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_connect_timeout 2s;
      proxy_read_timeout 30s;
      # A message is sent again to the other server only when the first
      # one could not be reached (nothing was processed there).
      proxy_next_upstream error;
      # Which server answered (the tests check that a conversation stays on one).
      add_header X-Upstream $upstream_addr always;
    }}
  }}
}}
"""

    def start(self) -> "NginxServer":
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(binary).exists():
            raise MissingPackage("nginx is missing: run scripts/system-deps.sh (make test does)")
        conf = self.root / "nginx.conf"
        conf.write_text(self.config(), encoding="utf-8")
        self._spawn([binary, "-p", str(self.root), "-c", str(conf)], self.port)
        return self
