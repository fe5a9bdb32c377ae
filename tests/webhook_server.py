"""A Slack-style incoming webhook for the channel tests: a local HTTP server that records each
POST's JSON body and answers 200 "ok"; started and stopped by the test (to be down a while)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SECRET_PATH = "/services/T0001/B0002/sEcReTtOkEn1234"


class Hook:
    """A Slack-style incoming webhook: records each POST's JSON body, answers 200 "ok"."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.bodies: list[Any] = []
        self.paths: list[str] = []
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{SECRET_PATH}"

    def start(self) -> None:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                hook.bodies.append(json.loads(self.rfile.read(length)))
                hook.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
