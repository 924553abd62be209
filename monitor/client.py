"""A client of the embedded monitor's HTTP API: post results, read the state.

:class:`MonitorClient` (blocking, standard library only) and :class:`AsyncMonitorClient`
(aiohttp) send results to ``POST /v1/results`` as NDJSON in batches. A batch that fails
in transit (connection refused or reset, a timeout, HTTP 5xx, 408 or 429) is sent again after
an exponential backoff with jitter. Re-sending is safe: the monitor counts a result it already
holds as ``duplicate`` and changes nothing, so a batch whose reply was lost can be sent twice.

Each call returns a :class:`PostReport`: the monitor's counts (``events = accepted + duplicate
+ conflict + invalid``) summed over the batches, and every rejection the monitor listed traced
back to the caller's line (its position in the input and the caller's label, e.g.
``samples_mmlu.jsonl:17``). The monitor lists the first rejections of each request
(``dead_letters_per_request``, 20 by default); ``rejected_unlisted`` counts the others.

Example (against a monitor started with ``llm-monitor run``)::

    with MonitorClient("http://127.0.0.1:8000") as client:
        report = client.post([{"benchmark": "mmlu", "item_id": "q1", "model": "a", "score": 1}])
    report.accepted  # 1
"""

from __future__ import annotations

import asyncio
import http.client
import json
import random
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from monitor.errors import MonitorError

#: Statuses after which the same batch is sent again: the monitor did not store it.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_RESULTS = "/v1/results"


class ClientError(MonitorError):
    """The monitor refused a request or could not be reached: check the URL, token and server log."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        #: The HTTP status of a refusal (e.g. 404 for an unknown benchmark); None when the
        #: monitor could not be reached.
        self.status = status


class _Dumpable(Protocol):
    def model_dump(self, *, mode: str, exclude_none: bool) -> dict[str, Any]: ...


Event = Mapping[str, Any] | _Dumpable


@dataclass(frozen=True)
class Rejection:
    """One line the monitor rejected: its position in the input, the caller's label, why."""

    index: int
    source: str | None
    reason: str
    detail: str


@dataclass
class PostReport:
    """What the monitor did with the posted lines, summed over the batches.

    ``events = accepted + duplicate + conflict + invalid`` (the monitor's own account of each
    request). ``rejected`` holds the rejections the monitor listed, each traced back to the
    caller's line; ``rejected_unlisted`` the ones it counted without listing. ``retries`` is
    how many batches were sent again; a line of a retried batch counted ``duplicate`` may
    have been accepted by an attempt whose reply was lost.

    ``passed_over`` is the caller's part of the account: lines of its input that it read and
    did not send, by why (``post`` and ``watch``: an lm-eval filter other than the one read,
    a blank line, a copy of a file already posted), so that every input line is in the
    account: lines read = ``events`` + the sum of ``passed_over``.
    """

    events: int = 0
    accepted: int = 0
    duplicate: int = 0
    conflict: int = 0
    invalid: int = 0
    batches: int = 0
    retries: int = 0
    rejected: list[Rejection] = field(default_factory=list)
    rejected_unlisted: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    last_change_id: int | None = None
    passed_over: dict[str, int] = field(default_factory=dict)

    def pass_over(self, counts: Mapping[str, int]) -> None:
        """Add lines read and not sent, by why."""
        for why, n in counts.items():
            if n:
                self.passed_over[why] = self.passed_over.get(why, 0) + int(n)

    def add(self, reply: Mapping[str, Any], *, offset: int, sources: Sequence[str | None],
            retries: int) -> None:
        """Fold in the monitor's reply to one batch whose first line is input line ``offset``."""
        for key in ("events", "accepted", "duplicate", "conflict", "invalid"):
            setattr(self, key, getattr(self, key) + int(reply.get(key, 0)))
        self.batches += 1
        self.retries += retries
        listed = reply.get("rejected") or []
        for r in listed:
            i = r.get("index")
            local = i if isinstance(i, int) and 0 <= i < len(sources) else None
            self.rejected.append(Rejection(
                index=offset + local if local is not None else -1,
                source=sources[local] if local is not None else None,
                reason=str(r.get("reason", "")), detail=str(r.get("detail", ""))))
        total = int(reply.get("conflict", 0)) + int(reply.get("invalid", 0))
        self.rejected_unlisted += max(total - len(listed), 0)
        for reason, n in (reply.get("reasons") or {}).items():
            self.reasons[reason] = self.reasons.get(reason, 0) + int(n)
        if reply.get("last_change_id") is not None:
            self.last_change_id = int(reply["last_change_id"])

    def merge(self, other: PostReport) -> PostReport:
        """Both reports together (``other``'s line indices are kept as they are)."""
        out = PostReport()
        for key in ("events", "accepted", "duplicate", "conflict", "invalid", "batches",
                    "retries", "rejected_unlisted"):
            setattr(out, key, getattr(self, key) + getattr(other, key))
        out.rejected = [*self.rejected, *other.rejected]
        out.reasons = dict(self.reasons)
        for reason, n in other.reasons.items():
            out.reasons[reason] = out.reasons.get(reason, 0) + n
        out.last_change_id = (other.last_change_id if other.last_change_id is not None
                              else self.last_change_id)
        out.passed_over = dict(self.passed_over)
        out.pass_over(other.passed_over)
        return out

    def counts(self) -> dict[str, int]:
        return {"events": self.events, "accepted": self.accepted, "duplicate": self.duplicate,
                "conflict": self.conflict, "invalid": self.invalid}

    def as_dict(self) -> dict[str, Any]:
        return {**self.counts(), "batches": self.batches, "retries": self.retries,
                "rejected": [r.__dict__ for r in self.rejected],
                "rejected_unlisted": self.rejected_unlisted, "reasons": self.reasons,
                "last_change_id": self.last_change_id, "passed_over": self.passed_over}


def plan_path(benchmark: str, model: str, *, against: Sequence[str] | None = None,
              top: int | None = None, budget: int | None = None, count: int = 100) -> str:
    """The plan route's path and query for these options (names URL-quoted)."""
    query: dict[str, Any] = {"count": count}
    if against:
        query["against"] = ",".join(against)
    if top:
        query["top"] = top
    if budget:
        query["budget"] = budget
    quote = urllib.parse.quote
    return (f"/v1/benchmarks/{quote(benchmark, safe='')}/models/{quote(model, safe='')}/plan?"
            + urllib.parse.urlencode(query))


def encode_event(event: Event) -> bytes:
    """One NDJSON line: a mapping as JSON, an :class:`~monitor.contracts.ItemResult` by its
    JSON dump (None fields left out)."""
    if isinstance(event, Mapping):
        obj: Any = dict(event)
    else:
        obj = event.model_dump(mode="json", exclude_none=True)
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _labelled(events: Iterable[Event], sources: Iterable[str | None] | None
              ) -> Iterable[tuple[Event, str | None]]:
    return zip(events, sources, strict=True) if sources is not None else ((e, None) for e in events)


def _batches(pairs: Iterable[tuple[Event, str | None]], *, size: int, max_bytes: int
             ) -> Iterator[tuple[list[bytes], list[str | None]]]:
    """Encoded lines in batches of at most ``size`` lines and about ``max_bytes`` bytes."""
    lines: list[bytes] = []
    labels: list[str | None] = []
    nbytes = 0
    for ev, label in pairs:
        line = encode_event(ev)
        if lines and (len(lines) >= size or nbytes + len(line) + 1 > max_bytes):
            yield lines, labels
            lines, labels, nbytes = [], [], 0
        lines.append(line)
        labels.append(label)
        nbytes += len(line) + 1
    if lines:
        yield lines, labels


def _check_options(batch_size: int, retries: int, backoff: float, timeout: float) -> None:
    if batch_size < 1:
        raise ValueError(f"`batch_size` must be at least 1, got {batch_size}")
    if retries < 0:
        raise ValueError(f"`retries` must be at least 0, got {retries}")
    if backoff < 0 or timeout <= 0:
        raise ValueError(f"`backoff` must be >= 0 and `timeout` > 0, got {backoff}, {timeout}")


def _split_url(url: str) -> urllib.parse.SplitResult:
    parts = urllib.parse.urlsplit(url.rstrip("/"))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"`url` must look like http://host:port, got {url!r}")
    return parts


class _Base:
    """The options and reply handling both clients share (parameters: see MonitorClient)."""

    def __init__(self, url: str, *, token: str | None = None, batch_size: int = 2000,
                 max_bytes: int = 4_000_000, retries: int = 5, backoff: float = 0.5,
                 max_backoff: float = 10.0, timeout: float = 60.0,
                 rng: random.Random | None = None) -> None:
        _check_options(batch_size, retries, backoff, timeout)
        self.url = url.rstrip("/")
        self._parts = _split_url(url)
        self.token = token
        self.batch_size = batch_size
        self.max_bytes = max_bytes
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.timeout = timeout
        self._rng = rng or random.Random()

    def _headers(self, *, body: bool) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "llm-monitor-client"}
        if body:
            headers["Content-Type"] = "application/x-ndjson"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _delay(self, attempt: int) -> float:
        """Exponential backoff with full jitter on the upper half: no herd of synchronised retries."""
        cap = min(self.max_backoff, self.backoff * 2 ** attempt)
        return cap * (0.5 + 0.5 * self._rng.random())

    def _reply(self, status: int, data: bytes, path: str) -> Any:
        """The JSON of a final reply; a refusal becomes a ClientError naming the path."""
        try:
            doc = json.loads(data) if data else None
        except ValueError:
            doc = None
        # A batch of only invalid lines is answered 400 with the usual account: not an error.
        if status < 300 or (status == 400 and isinstance(doc, dict) and "events" in doc):
            return doc
        detail = doc.get("detail") if isinstance(doc, dict) else data[:200].decode("utf-8", "replace")
        raise ClientError(f"{self.url}{path}: HTTP {status}: {detail}", status=status)


class MonitorClient(_Base):
    """Blocking client of one monitor (``http://host:port``); one kept-alive connection.

    Parameters
    ----------
    url : str
        The monitor's base URL.
    token : str, optional
        The bearer token the monitor was started with.
    batch_size, max_bytes : int
        At most this many lines, and about this many bytes, per request.
    retries : int
        How many times a batch is sent again after a failure in transit.
    backoff, max_backoff : float
        The first retry waits about ``backoff`` seconds, each next one twice as long, at most
        ``max_backoff``.
    timeout : float
        Seconds to wait for a reply.
    """

    _conn: http.client.HTTPConnection | None = None

    def __enter__(self) -> MonitorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = (http.client.HTTPSConnection if self._parts.scheme == "https"
                   else http.client.HTTPConnection)
            self._conn = cls(self._parts.hostname or "", self._parts.port, timeout=self.timeout)
        return self._conn

    def _once(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        reused = self._conn is not None
        try:
            return self._exchange(method, path, body)
        except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
            # http.client.RemoteDisconnected is a ConnectionResetError
            if not reused:
                raise
            # The monitor closes a kept-alive connection that was idle (idle_timeout): that is
            # no failure in transit, so the request goes at once on a new connection, uncounted.
            return self._exchange(method, path, body)

    def _exchange(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        conn = self._connection()
        try:
            conn.request(method, self._parts.path + path, body=body,
                         headers=self._headers(body=body is not None))
            resp = conn.getresponse()
            data = resp.read()
        except BaseException:
            self.close()
            raise
        if resp.getheader("Connection", "").lower() == "close":
            self.close()
        return resp.status, data

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[Any, int]:
        """(JSON reply, retries used): ``body`` sent again on failures in transit."""
        attempt = 0
        while True:
            try:
                status, data = self._once(method, path, body)
                if status not in RETRY_STATUSES:
                    return self._reply(status, data, path), attempt
                why = f"HTTP {status}"
            except (OSError, http.client.HTTPException) as exc:  # TimeoutError is an OSError
                why = f"{type(exc).__name__}: {exc}"
            if attempt >= self.retries:
                raise ClientError(f"{self.url}{path}: gave up after {attempt + 1} attempts "
                                  f"(last: {why})")
            time.sleep(self._delay(attempt))
            attempt += 1

    def get(self, path: str) -> Any:
        """The JSON of ``GET path`` (e.g. ``/v1/benchmarks/mmlu/ranking``)."""
        return self.request("GET", path)[0]

    def plan(self, benchmark: str, model: str, *, against: Sequence[str] | None = None,
             top: int | None = None, budget: int | None = None, count: int = 100
             ) -> dict[str, Any]:
        """The stop signal of ``model`` on ``benchmark`` (``GET …/plan``, docs/until-resolved.md):
        ``action`` continue or stop, ``reason``, the pairs, ``next_items``. An unknown
        benchmark raises :class:`ClientError` with ``status`` 404."""
        plan: dict[str, Any] = self.get(plan_path(benchmark, model, against=against, top=top,
                                                  budget=budget, count=count))
        return plan

    def post(self, events: Iterable[Event], *, sources: Iterable[str | None] | None = None
             ) -> PostReport:
        """Send ``events`` (mappings or ItemResults) in batches; ``sources`` labels each line
        (e.g. ``file:line``) for the report's rejections."""
        return self.post_labelled(_labelled(events, sources))

    def post_labelled(self, pairs: Iterable[tuple[Event, str | None]], *,
                      into: PostReport | None = None) -> PostReport:
        """:meth:`post` of (event, label) pairs. The account is kept in ``into`` when given,
        so a caller still has the account of the acknowledged batches when a later one fails."""
        report = PostReport() if into is None else into
        offset = 0
        for lines, labels in _batches(pairs, size=self.batch_size, max_bytes=self.max_bytes):
            reply, retries = self.request("POST", _RESULTS, b"\n".join(lines) + b"\n")
            report.add(reply, offset=offset, sources=labels, retries=retries)
            offset += len(lines)
        return report


class AsyncMonitorClient(_Base):
    """The same as :class:`MonitorClient` on aiohttp, for code that runs an event loop."""

    _session: Any = None

    async def __aenter__(self) -> AsyncMonitorClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> Any:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self._session

    async def request(self, method: str, path: str, body: bytes | None = None
                      ) -> tuple[Any, int]:
        """(JSON reply, retries used): ``body`` sent again on failures in transit."""
        import aiohttp

        session = self._client()
        attempt = 0
        while True:
            try:
                async with session.request(method, self.url + path, data=body,
                                           headers=self._headers(body=body is not None)) as resp:
                    status, data = resp.status, await resp.read()
                if status not in RETRY_STATUSES:
                    return self._reply(status, data, path), attempt
                why = f"HTTP {status}"
            except (aiohttp.ClientError, OSError) as exc:  # TimeoutError is an OSError
                why = f"{type(exc).__name__}: {exc}"
            if attempt >= self.retries:
                raise ClientError(f"{self.url}{path}: gave up after {attempt + 1} attempts "
                                  f"(last: {why})")
            await asyncio.sleep(self._delay(attempt))
            attempt += 1

    async def get(self, path: str) -> Any:
        return (await self.request("GET", path))[0]

    async def post(self, events: Iterable[Event], *,
                   sources: Iterable[str | None] | None = None) -> PostReport:
        """Send ``events`` in batches, one request at a time (the monitor applies them in order)."""
        return await self.post_labelled(_labelled(events, sources))

    async def post_labelled(self, pairs: Iterable[tuple[Event, str | None]], *,
                            into: PostReport | None = None) -> PostReport:
        """:meth:`post` of (event, label) pairs; ``into`` as for MonitorClient."""
        report = PostReport() if into is None else into
        offset = 0
        for lines, labels in _batches(pairs, size=self.batch_size, max_bytes=self.max_bytes):
            reply, retries = await self.request("POST", _RESULTS, b"\n".join(lines) + b"\n")
            report.add(reply, offset=offset, sources=labels, retries=retries)
            offset += len(lines)
        return report
