"""MonitorClient over a kept-alive connection the monitor closed while it was idle (the
embedded server closes one after idle_timeout, 10 s by default): the next request goes on a
new connection at once, neither counted as a retry nor failing a client without retries."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from monitor.client import MonitorClient


@pytest.fixture
def one_reply_per_connection() -> Iterator[tuple[str, list[int]]]:
    """A server that answers one request per connection and then closes it without saying so
    (no ``Connection: close``), as a server closing an idle kept-alive connection does."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.1)
    connections: list[int] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            conn.settimeout(10)
            connections.append(1)
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
                               if h.lower().startswith(b"content-length:")), 0)
                while len(body) < length:
                    body += conn.recv(65536)
                n = len(body.splitlines())
                reply = json.dumps({"events": n, "accepted": n}).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: " + str(len(reply)).encode() + b"\r\n\r\n"
                             + reply)
                conn.shutdown(socket.SHUT_RDWR)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    host, port = srv.getsockname()
    yield f"http://{host}:{port}", connections
    stop.set()
    thread.join(timeout=5)
    srv.close()


def test_a_connection_closed_while_idle_is_no_retry(
        one_reply_per_connection: tuple[str, list[int]]) -> None:
    url, connections = one_reply_per_connection
    with MonitorClient(url, retries=0) as client:
        reports = [client.post([{"benchmark": "b", "item_id": f"q{i}", "model": "m",
                                 "score": 1}]) for i in range(3)]
    assert [(r.accepted, r.retries) for r in reports] == [(1, 0), (1, 0), (1, 0)]
    assert len(connections) == 3
