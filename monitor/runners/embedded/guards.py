"""What keeps hostile or careless HTTP clients from hurting the embedded monitor's other clients.

:class:`ConnectionCap` bounds the open connections (counted exactly, from aiohttp's own
connection callbacks); :class:`BodySlots` bounds the request bodies held at once and gives the
slot of a body arriving slower than ``min_body_rate`` to a request that needs it;
:func:`browser_guard` keeps web pages of other origins (and rebound DNS names) away from a
monitor that has no token. :mod:`monitor.runners.embedded.server` wires them into the aiohttp server.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import StreamReader, web
from yarl import URL

from monitor.runners.settings import Settings

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ErrorResponse = Callable[[int, str, str], web.Response]

# -- connections ----------------------------------------------------------------------------
#: Connections accepted in one go before the server sees them (the listen backlog): each
#: holds a file descriptor before the cap below can close another.
BACKLOG = 32

#: File descriptors kept free of connections (the database, its journal, logs, a scrape).
FD_RESERVE = 64

_BUSY = (b'{"error": "busy", "detail": "too many connections (max_connections): every one is '
         b'inside a request; retry"}')
BUSY_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                 b"Connection: close\r\nContent-Length: " + str(len(_BUSY)).encode()
                 + b"\r\n\r\n" + _BUSY)


def connection_cap(setting: int) -> int:
    """``max_connections``, lowered to fit the process's open-files limit (``ulimit -n``)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return setting
    # A burst of accepts can come before the sockets closed for the previous one are gone.
    return max(1, min(setting, soft - FD_RESERVE - 2 * BACKLOG))


class ConnectionCap:
    """At most ``cap`` open connections on ``server``: past it, the connection idle the longest
    (waiting for a request, or for the rest of its headers) is closed to make room, and when
    every one is inside a request the new one is answered 503 and closed. So idle sockets can
    neither exhaust the file descriptors nor keep other clients out.

    The count is exact whatever the clients do (a fresh connection per request, a close by
    either side, a reset, a half-close): a connection is counted from aiohttp's
    ``connection_made`` callback on the server to its ``connection_lost``, each of which
    aiohttp calls exactly once per connection (``RequestHandler`` drops its manager after
    the second). A connection closed here to make room leaves the count at once: its socket
    is gone by the next turn of the loop.
    """

    def __init__(self, server: web.Server, cap: int) -> None:
        self.server, self.cap = server, cap
        self._open: dict[Any, None] = {}  # handlers connected and not lost, oldest first
        made, lost = server.connection_made, server.connection_lost

        def connection_made(handler: Any, transport: asyncio.Transport) -> None:
            made(handler, transport)
            self._admit(handler, transport)

        def connection_lost(handler: Any, exc: BaseException | None = None) -> None:
            self._open.pop(handler, None)
            lost(handler, exc)

        # Instance attributes shadow the methods: every handler reports to its manager here.
        vars(server).update(connection_made=connection_made, connection_lost=connection_lost)

    @property
    def count(self) -> int:
        """Connections open now (accepted, set up, not yet closed)."""
        return len(self._open)

    def _admit(self, handler: Any, transport: asyncio.Transport) -> None:
        if len(self._open) >= self.cap:
            # aiohttp keeps no public flags for these: a handler not inside a request is idle;
            # one that never completed a request goes first, then the one whose keep-alive
            # deadline is the earliest (idle the longest).
            idle = [h for h in self._open if not getattr(h, "_request_in_progress", True)]
            if not idle:
                transport.write(BUSY_RESPONSE)
                transport.close()  # its connection_lost comes; it was never counted
                return
            victim = min(idle, key=lambda h: (getattr(h, "_request_count", 0) > 0,
                                              getattr(h, "_next_keepalive_close_time", 0.0)))
            del self._open[victim]
            victim.force_close()
        self._open[handler] = None

    def __call__(self) -> asyncio.Protocol:
        """The protocol factory of the listening socket: one aiohttp handler."""
        return self.server()


# -- request bodies -------------------------------------------------------------------------
#: A body is judged against ``min_body_rate`` only after this long in its slot (so that a
#: request that has just started is never taken for a slow one).
BODY_RATE_GRACE = 0.5

#: While every slot is taken, a waiting request looks for a slow body this often (seconds).
_SLOT_POLL = 0.05


class SlowBody(Exception):
    """The body lost its slot: it arrived slower than ``min_body_rate`` while another request
    waited for one."""

    def __init__(self, rate: float) -> None:
        super().__init__(f"{rate:.0f} bytes/s")
        self.rate = rate


class Body:
    """One request body holding a slot: bytes received so far, whether it is still arriving,
    the task reading it, and the rate at which it was cut off (None while it is not)."""

    __slots__ = ("cut_at", "reader", "received", "receiving", "started")

    def __init__(self, started: float) -> None:
        self.started = started
        self.received = 0
        self.receiving = True
        self.reader: asyncio.Future[bytes | None] | None = None
        self.cut_at: float | None = None

    def rate(self, now: float) -> float:
        """Average bytes per second since the body got its slot."""
        return self.received / max(now - self.started, 1e-9)


class BodySlots:
    """At most ``size`` request bodies held at once (being received, or waiting for the
    ingest worker), so memory holds at most ``size`` × ``max_body_bytes`` of them.

    A slow client cannot keep a slot a fast one needs: when every slot is taken, the body
    still arriving at the lowest average rate below ``min_rate`` bytes/s (judged after
    :data:`BODY_RATE_GRACE` seconds in its slot) is cut off — its reading task is cancelled
    and :meth:`read` raises :class:`SlowBody`, answered 408 — and its slot goes to the
    waiting request. Bodies that keep up with ``min_rate``, and bodies fully received, are
    never cut: a request then waits for a slot, as long as ``timeout``.
    """

    def __init__(self, size: int, min_rate: float) -> None:
        self.size, self.min_rate = size, min_rate
        self._held: set[Body] = set()
        self._freed = asyncio.Event()

    async def acquire(self, timeout: float) -> Body | None:
        """A slot for a request body, or None after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self._held) >= self.size and not self._evict(loop.time()):
            left = deadline - loop.time()
            if left <= 0:
                return None
            # woken by a freed slot, or soon enough to find a body that became slow
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._freed.wait(), min(left, _SLOT_POLL))
        body = Body(loop.time())
        self._held.add(body)
        return body

    @staticmethod
    async def read(body: Body, content: StreamReader, content_length: int | None, limit: int,
                   *, idle: float, total: float) -> bytes | None:
        """:func:`read_limited` for the body holding ``body``'s slot, in a task of its own so
        that the slot can be taken back: raises :class:`SlowBody` when it was. (Cancelling
        the task leaves the stream as it was, so aiohttp can still drain the rest of the
        body after the answer, as after any other refusal.)"""
        if body.cut_at is not None:
            raise SlowBody(body.cut_at)
        body.reader = asyncio.ensure_future(read_limited(
            content, content_length, limit, idle=idle, total=total, body=body))
        try:
            return await body.reader
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if body.cut_at is None or (task is not None and task.cancelling()):
                raise
            raise SlowBody(body.cut_at) from None

    def release(self, body: Body) -> None:
        if body in self._held:
            self._held.remove(body)
            # Everyone waiting now wakes; later waiters wait for the next release.
            self._freed.set()
            self._freed = asyncio.Event()

    def _evict(self, now: float) -> bool:
        slow = [(b.rate(now), b) for b in self._held
                if b.receiving and now - b.started >= BODY_RATE_GRACE
                and b.rate(now) < self.min_rate]
        if not slow:
            return False
        rate, body = min(slow, key=lambda rb: rb[0])
        self._held.remove(body)
        body.cut_at = rate
        if body.reader is not None:
            body.reader.cancel()
        return True


async def read_limited(content: StreamReader, content_length: int | None, limit: int, *,
                       idle: float, total: float, body: Body | None = None) -> bytes | None:
    """The body, or None as soon as it exceeds ``limit`` bytes (nothing more is read).

    Raises TimeoutError when no byte came for ``idle`` seconds or the whole body took longer
    than ``total``. Counts the bytes in ``body``, which is marked received at the end.
    """
    if content_length is not None and content_length > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(total):
            while chunk := await asyncio.wait_for(content.readany(), idle):
                chunks.append(chunk)
                size += len(chunk)
                if body is not None:
                    body.received = size
                if size > limit:
                    return None
    finally:
        if body is not None:
            body.receiving = False
    return b"".join(chunks)


# -- browsers -------------------------------------------------------------------------------
#: Request headers only a browser sends (Fetch Metadata); a script or an HTTP library sends
#: none of them, nor an Origin.
FETCH_METADATA = ("Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Sec-Fetch-User")

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def host_name(value: str) -> str:
    """The host of a Host header or an Origin (``[::1]:8000`` → ``::1``), lower case."""
    value = value.strip().lower()
    if "://" in value:
        value = value.split("://", 1)[1].split("/", 1)[0]
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def origin_of(value: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin such as ``http://127.0.0.1:8000`` (the default port
    filled in), or None for ``null`` and anything that is not an origin."""
    try:
        url = URL(value.strip())
    except ValueError:
        return None
    if not url.absolute or url.scheme not in ("http", "https") or url.host is None \
            or url.port is None or url.path not in ("", "/"):
        return None
    return url.scheme, url.host.lower(), url.port


def browser_guard(settings: Settings, error: ErrorResponse) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Without a token, a page in a browser must not drive the monitor.

    The Host must name the bound address, a loopback name or one of ``allowed_hosts`` (a
    rebound DNS name is refused: 421). A request carrying an ``Origin`` other than this
    server's own — scheme, host and port, as the browser addressed it (``http://`` + Host) —
    is refused (403). A write (any method but GET, HEAD and OPTIONS) from a browser — one
    that sends an Origin or Fetch Metadata (``Sec-Fetch-*``) — must come from this origin
    (``Sec-Fetch-Site: same-origin``) with its Origin and a Content-Type: a page on another
    port of the same host is same-site, not same-origin, and a ``no-cors`` fetch of a Blob
    sends no Content-Type at all. Scripts and HTTP clients send none of these headers and
    are not concerned.
    """
    names = {"localhost", "127.0.0.1", "::1", host_name(settings.host),
             *(host_name(h) for h in settings.allowed_hosts)}

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        hdrs = request.headers
        host = host_name(hdrs.get("Host", ""))
        if host not in names:
            return error(421, "wrong-host", f"Host {host!r} is not a name of this server; "
                         "add it to allowed_hosts, or set a token")
        own = origin_of(f"http://{hdrs.get('Host', '')}")
        origin = hdrs.get("Origin")
        if origin is not None and (own is None or origin_of(origin) != own):
            return error(403, "cross-origin", f"requests from the origin {origin[:100]!r} are "
                         f"refused: only pages of this server's own origin "
                         f"(http://{hdrs.get('Host', '')[:100]}) may call it without a token")
        if request.method not in _SAFE_METHODS and (
                origin is not None or any(h in hdrs for h in FETCH_METADATA)):
            site = hdrs.get("Sec-Fetch-Site", "same-origin")
            if site != "same-origin" or origin is None:
                return error(403, "cross-origin", f"a browser write must come from a page of "
                             f"this server's own origin (Sec-Fetch-Site {site!r}, Origin "
                             f"{(origin or 'absent')[:100]!r}); without a token, other pages "
                             "may not write")
            if "Content-Type" not in hdrs:
                return error(415, "unsupported-media-type", "a write from a browser must say "
                             "Content-Type: application/json (or application/x-ndjson)")
        return await handler(request)

    return guard
