"""The shipped nginx configuration (deploy/nginx/bot.conf), run for real.

Debian's nginx runs the file as it is, with only what differs on one
machine changed: the upstream host names become local ports, the
certificate is a throwaway self-signed one, the ports are free ones and the
logs go to a temporary directory. Small HTTP servers stand in for the Rasa
servers and the web app and answer with their name and the headers they
received. The test then checks what the deployment guide promises: HTTPS
only, Rasa's HTTP API denied, no visitor address passed on, and one
conversation on one Rasa server (the hash of X-Conversation-Id), spread
over both.
"""
from __future__ import annotations

import json
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest
import requests

from bot.local_services import NginxServer, free_port
from bot.paths import project_dir

pytestmark = pytest.mark.slow

CONF = project_dir() / "deploy" / "nginx" / "bot.conf"


class _Named(BaseHTTPRequestHandler):
    """Answers every request with the server's name and the request's headers."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = json.dumps({"server": self.server.name, "path": self.path,  # type: ignore[attr-defined]
                           "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


def _stand_in(name: str) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Named)
    server.name = name  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class DeployNginx(NginxServer):
    """nginx running deploy/nginx/bot.conf with the machine-specific parts replaced."""

    def __init__(self, upstreams: Dict[str, int]) -> None:
        super().__init__(list(upstreams.values()))
        self.upstreams = upstreams
        self.http_port = free_port()

    def config(self) -> str:
        conf = CONF.read_text(encoding="utf-8")
        for host, port in self.upstreams.items():
            conf = re.sub(rf"\bserver {re.escape(host)}:\d+", f"server 127.0.0.1:{port}", conf)
        conf = conf.replace("listen 443 ssl default_server;", f"listen 127.0.0.1:{self.port} ssl default_server;")
        conf = conf.replace("listen 80 default_server;", f"listen 127.0.0.1:{self.http_port} default_server;")
        conf = conf.replace("/etc/nginx/tls/", f"{self.root}/")
        conf = conf.replace("/var/log/nginx/", f"{self.root}/")
        conf = conf.replace("/var/www/certbot", str(self.root))
        return f"{self.main_context()}\n{conf}\n}}\n"

    def start(self) -> "DeployNginx":
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(self.root / "privkey.pem"), "-out", str(self.root / "fullchain.pem")],
                       check=True, capture_output=True)
        super().start()
        return self


@pytest.fixture(scope="module")
def deployed() -> Iterator[Dict[str, Any]]:
    stand_ins = {name: _stand_in(name) for name in ("rasa-1", "rasa-2", "web")}
    nginx = DeployNginx({name: s.server_address[1] for name, s in stand_ins.items()})
    try:
        nginx.start()
        yield {"https": f"https://127.0.0.1:{nginx.port}", "http": f"http://127.0.0.1:{nginx.http_port}",
               "ca": str(nginx.root / "fullchain.pem")}
    finally:
        nginx.remove()
        for server in stand_ins.values():
            server.shutdown()


def post_message(deployed: Dict[str, Any], conversation: str) -> Dict[str, Any]:
    response = requests.post(f"{deployed['https']}/webhooks/rest/webhook", json={"sender": conversation, "message": "hi"},
                             headers={"X-Conversation-Id": conversation}, verify=deployed["ca"], timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def test_each_conversation_stays_on_one_rasa_server_and_they_spread(deployed: Dict[str, Any]) -> None:
    served: Dict[str, set] = {}
    for n in range(8):  # each conversation's messages one after another: round robin would alternate
        conversation = f"conversation-{n}"
        served[conversation] = {post_message(deployed, conversation)["server"] for _ in range(3)}
    assert all(len(servers) == 1 for servers in served.values()), served
    assert set().union(*served.values()) == {"rasa-1", "rasa-2"}, served


def test_no_visitor_address_reaches_the_servers(deployed: Dict[str, Any]) -> None:
    seen = post_message(deployed, "privacy")
    assert seen["server"] in ("rasa-1", "rasa-2")
    assert not {"x-forwarded-for", "x-real-ip", "forwarded"} & set(seen["headers"]), seen["headers"]
    assert seen["headers"].get("x-forwarded-proto") == "https"


@pytest.mark.parametrize("path", ["/model", "/conversations/x/tracker", "/status", "/version", "/webhooks/callback/webhook"])
def test_rasas_http_api_and_other_channels_are_denied(deployed: Dict[str, Any], path: str) -> None:
    response = requests.get(deployed["https"] + path, verify=deployed["ca"], timeout=10)
    assert response.status_code == 403


def test_the_web_app_gets_the_rest_and_http_only_redirects(deployed: Dict[str, Any]) -> None:
    page = requests.get(deployed["https"] + "/demo", verify=deployed["ca"], timeout=10)
    assert page.status_code == 200 and page.json()["server"] == "web"
    assert "max-age=" in page.headers.get("Strict-Transport-Security", "")
    plain = requests.get(deployed["http"] + "/demo", allow_redirects=False, timeout=10)
    assert plain.status_code == 301 and plain.headers["Location"].startswith("https://")
