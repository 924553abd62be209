"""Model access for the stability audit: the adapter interface, an OpenAI-compatible
chat-completions HTTP adapter (retries with backoff) and a deterministic local adapter for tests."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from monitor.audit.variants import MCItem, original, perturb
from monitor.errors import MonitorError


class AdapterError(MonitorError):
    """The model endpoint kept failing: check the URL, key and server logs, or raise --retries/--timeout."""


@dataclass(frozen=True)
class Query:
    """What an adapter is asked: the prompt plus identifiers (local adapters may use them)."""

    item_id: str
    kind: str
    prompt: str
    labels: tuple[str, ...]


class ModelAdapter(Protocol):
    """Answers one prompt; raise AdapterError when the model cannot be reached."""

    name: str

    async def complete(self, query: Query) -> str: ...

    async def aclose(self) -> None: ...


class EndpointConfig(BaseModel):
    """Settings of an OpenAI-compatible chat-completions endpoint."""

    model_config = ConfigDict(frozen=True)

    base_url: str = "http://127.0.0.1:8000/v1"
    model: str
    api_key: SecretStr | None = None
    temperature: float = 0.0
    max_tokens: int = Field(default=16, ge=1)
    timeout: float = Field(default=30.0, gt=0)
    retries: int = Field(default=3, ge=0)
    backoff: float = Field(default=0.5, ge=0)


class OpenAIChatAdapter:
    """POST {base_url}/chat/completions; retries 429/5xx, timeouts and connection errors with
    exponential backoff, fails fast on other 4xx."""

    def __init__(self, config: EndpointConfig) -> None:
        self.config = config
        self.name = config.model
        self.retried = 0
        self._session: Any = None

    async def _get_session(self) -> Any:
        import aiohttp

        if self._session is None:
            headers = {"Content-Type": "application/json"}
            if self.config.api_key is not None:
                headers["Authorization"] = f"Bearer {self.config.api_key.get_secret_value()}"
            self._session = aiohttp.ClientSession(
                headers=headers, timeout=aiohttp.ClientTimeout(total=self.config.timeout))
        return self._session

    async def complete(self, query: Query) -> str:
        import aiohttp

        session = await self._get_session()
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        body = {"model": self.config.model, "temperature": self.config.temperature,
                "max_tokens": self.config.max_tokens,
                "messages": [{"role": "user", "content": query.prompt}]}
        last = ""
        attempts = self.config.retries + 1
        for attempt in range(attempts):
            if attempt:
                self.retried += 1
                await asyncio.sleep(min(self.config.backoff * 2 ** (attempt - 1), 30.0))
            try:
                async with session.post(url, json=body) as resp:
                    if resp.status == 200:
                        data = await resp.json(content_type=None)
                        try:
                            return str(data["choices"][0]["message"]["content"] or "")
                        except (KeyError, IndexError, TypeError):
                            raise AdapterError(f"{url}: response is not a chat completion "
                                               f"(item {query.item_id})") from None
                    text = (await resp.text())[:200]
                    last = f"HTTP {resp.status}: {text}"
                    if resp.status != 429 and resp.status < 500:
                        raise AdapterError(f"{url} rejected the request for item "
                                           f"{query.item_id} ({last})")
            except TimeoutError:
                last = f"timed out after {self.config.timeout:g} s"
            except aiohttp.ClientError as exc:
                last = f"{type(exc).__name__}: {exc}"
        raise AdapterError(f"{url} failed {attempts} times for item {query.item_id} "
                           f"({query.kind}); last error: {last}")

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class LocalAdapter:
    """Deterministic stand-in model: correct on the original with probability ``accuracy``,
    and flips to a wrong option under a perturbation with probability ``flip`` (by hashing
    item and kind, so reruns give the same answers)."""

    def __init__(self, items: Sequence[MCItem], *, accuracy: float = 0.8, flip: float = 0.05,
                 seed: int = 0, name: str = "local") -> None:
        for nm, v in (("accuracy", accuracy), ("flip", flip)):
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"`{nm}` must lie in [0, 1], got {v}")
        self.name = name
        self._items = {it.id: it for it in items}
        self._accuracy, self._flip, self._seed = accuracy, flip, seed

    def _u(self, *parts: str) -> float:
        digest = hashlib.blake2b("\x00".join((str(self._seed), *parts)).encode(),
                                 digest_size=8).digest()
        return int.from_bytes(digest, "little") / 2**64

    async def complete(self, query: Query) -> str:
        item = self._items[query.item_id]
        v = original(item) if query.kind == "original" else perturb(item, query.kind,
                                                                    seed=self._seed)
        right = self._u(item.id, "knows") < self._accuracy
        if right and query.kind != "original" and self._u(item.id, query.kind) < self._flip:
            right = False
        choice = v.answer if right else (v.answer + 1) % len(v.labels)
        return f"The answer is {v.labels[choice]}."

    async def aclose(self) -> None:
        return None
