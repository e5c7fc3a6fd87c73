"""A small HTTP extender for tests: a thread with ``http.server``; each verb answers with a function of
the decoded request (or raw bytes, a status code, a delay), and every request is kept."""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[dict[str, Any]], Any]


@dataclass
class Reply:
    """A raw reply: ``body`` bytes with ``status``, after ``delay`` seconds."""

    body: bytes = b"{}"
    status: int = 200
    delay: float = 0.0


@dataclass
class FakeExtender:
    verbs: dict[str, Answer | Reply] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    url: str = ""

    def calls(self, verb: str) -> list[dict[str, Any]]:
        return [body for path, body in self.requests if path == verb]


def _handler(fake: FakeExtender) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"null")
            verb = self.path.strip("/").split("/")[-1]
            fake.requests.append((verb, body))
            answer = fake.verbs.get(verb)
            if answer is None:
                reply = Reply(b"not found", 404)
            elif isinstance(answer, Reply):
                reply = answer
            else:
                reply = Reply(json.dumps(answer(body)).encode())
            if reply.delay:
                time.sleep(reply.delay)
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

    return Handler


@contextmanager
def serve_extender(
    verbs: Mapping[str, Answer | Reply] | None = None, *, tls: ssl.SSLContext | None = None
) -> Iterator[FakeExtender]:
    fake = FakeExtender(verbs=dict(verbs or {}))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    scheme = "https" if tls is not None else "http"
    fake.url = f"{scheme}://127.0.0.1:{server.server_address[1]}/ext"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def node_names(body: dict[str, Any]) -> list[str]:
    """The node names an ExtenderArgs carries, either form."""
    if body.get("NodeNames") is not None:
        return list(body["NodeNames"])
    return [n["metadata"]["name"] for n in body["Nodes"]["items"]]
