"""A stand-in Kubernetes API server on 127.0.0.1 for the day-two commands' tests, until `tpuplane sandbox`
gives them the real control plane: it answers GETs of the paths it was given with the objects it was given (as
`recorded_kueue` writes them) and everything else with the API server's 404 Status, and records every request.
Error answers (401, 403, a type not served) are the API server's Status bodies, as it sends them."""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NOT_SERVED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": "the server could not find the requested resource", "reason": "NotFound",
              "details": {}, "code": 404}


def status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": details or {}, "code": code}


def not_found(plural: str, group: str, name: str) -> dict[str, Any]:
    """The API server's answer for a named object that does not exist (its type is served)."""
    return status(404, "NotFound", f'{plural}.{group} "{name}" not found',
                  {"name": name, "group": group, "kind": plural})


def object_list(kind: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": f"{kind}List", "metadata": {"resourceVersion": "4800"}, "items": items}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    content_type: str | None = None


@dataclass
class StandIn:
    port: int
    kubeconfig: Path
    routes: dict[tuple[str, str], tuple[int, Any]]
    requests: list[Request] = field(default_factory=list)
    everything: tuple[int, Any] | None = None  # one answer to every request (401, 403 ...)
    latency: float = 0.0  # seconds every answer takes, as a remote API server's do

    def serve(self, path: str, body: Any, status_code: int = 200, method: str = "GET") -> None:
        self.routes[(method, path)] = (status_code, body)


class _Handler(http.server.BaseHTTPRequestHandler):
    def _handle(self) -> None:
        standin: StandIn = self.server.standin
        url = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        standin.requests.append(Request(self.command, url.path, urllib.parse.parse_qs(url.query),
                                        json.loads(raw) if raw else None, self.headers.get("Content-Type")))
        code, body = standin.everything or standin.routes.get((self.command, url.path), (404, NOT_SERVED))
        time.sleep(standin.latency)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain" if isinstance(body, bytes) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _handle

    def log_message(self, format: str, *args: Any) -> None:
        pass


def write_kubeconfig(path: Path, port: int, namespace: str = "team-a") -> Path:
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: standin, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
users: [{{name: u, user: {{token: not-a-secret}}}}]
contexts: [{{name: standin, context: {{cluster: standin, user: u, namespace: {namespace}}}}}]
current-context: standin
""")
    return path


@contextmanager
def standin_api(folder: Path) -> Iterator[StandIn]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port = server.server_address[1]
    server.standin = StandIn(port, write_kubeconfig(folder / "kubeconfig", port), {})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.standin
    finally:
        server.shutdown()
        server.server_close()
