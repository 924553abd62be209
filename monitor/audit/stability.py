"""Perturbation stability: does a model keep answering multiple-choice items right when the
wording, option order, format or surrounding noise changes?

The flip rate is the share of (item, perturbation) pairs answered correctly in the original
form and wrongly once perturbed. Model access goes through a small adapter interface: an
OpenAI-compatible chat-completions HTTP adapter and a deterministic local adapter for tests.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, SecretStr
from scipy.stats import binomtest

from monitor.audit.textio import read_jsonl
from monitor.errors import InputError, MonitorError

KINDS = ("paraphrase", "shuffle", "format", "noise")
ALARM_FLIP_RATE = 0.10
LETTERS = tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


class AdapterError(MonitorError):
    """The model endpoint kept failing: check the URL, key and server logs, or raise --retries/--timeout."""


@dataclass(frozen=True)
class MCItem:
    """A multiple-choice item; ``answer`` is the index of the correct option."""

    id: str
    question: str
    options: tuple[str, ...]
    answer: int


def load_items(path: str | Path) -> list[MCItem]:
    """Read JSONL items with id, question, options (list) and answer (letter, index or option text)."""
    src = str(path)
    if not Path(path).is_file():
        raise InputError("no such file", source=src)
    items: list[MCItem] = []
    seen: set[str] = set()
    for line, obj in read_jsonl(Path(path)):
        for key in ("id", "question", "options", "answer"):
            if key not in obj:
                raise InputError("field missing", source=src, line=line, field=key)
        opts = obj["options"]
        if not isinstance(opts, list) or len(opts) < 2 or not all(isinstance(o, str) for o in opts):
            raise InputError("must be a list of at least two strings", source=src, line=line,
                             field="options")
        if len(opts) > len(LETTERS):
            raise InputError(f"at most {len(LETTERS)} options", source=src, line=line,
                             field="options")
        if not isinstance(obj["question"], str) or not obj["question"].strip():
            raise InputError("must be a non-empty string", source=src, line=line,
                             field="question")
        ans = obj["answer"]
        idx: int | None = None
        if isinstance(ans, bool):
            idx = None
        elif isinstance(ans, int):
            idx = ans if 0 <= ans < len(opts) else None
        elif isinstance(ans, str):
            a = ans.strip()
            if len(a) == 1 and a.upper() in LETTERS[: len(opts)]:
                idx = LETTERS.index(a.upper())
            elif a in opts:
                idx = opts.index(a)
        if idx is None:
            raise InputError(f"{ans!r} is neither an option letter, a 0-based index nor an "
                             "option text", source=src, line=line, field="answer")
        item_id = str(obj["id"])
        if item_id in seen:
            raise InputError(f"duplicate id {item_id!r}", source=src, line=line, field="id")
        seen.add(item_id)
        items.append(MCItem(item_id, obj["question"], tuple(opts), idx))
    if not items:
        raise InputError("no items found (empty file?)", source=src)
    return items


@dataclass(frozen=True)
class Variant:
    """One rendered form of an item: ``kind`` is "original" or a perturbation name."""

    item_id: str
    kind: str
    prompt: str
    labels: tuple[str, ...]
    answer: int

    @property
    def variant(self) -> str:
        """The event ``variant`` field: "original" or "perturbed:<kind>"."""
        return "original" if self.kind == "original" else f"perturbed:{self.kind}"


_PARAPHRASES = (
    "Here is a question.\n{q}",
    "Consider the following problem: {q}",
    "{q}\n(Think carefully before choosing.)",
    "A student was asked: \"{q}\" Which option is right?",
    "Please help with this one. {q}",
)
_NOISE = (
    "By the way, the museum downtown opens at nine on Sundays.",
    "Unrelated note: the office plants were watered yesterday.",
    "Fun fact: some octopuses have been seen using coconut shells as shelter.",
    "Reminder: the quarterly newsletter goes out next Tuesday.",
)


def _item_rng(seed: int, item_id: str, kind: str) -> np.random.Generator:
    digest = hashlib.blake2b(f"{item_id}\x00{kind}".encode(), digest_size=8).digest()
    return np.random.default_rng([seed, int.from_bytes(digest, "little")])


def _render(question: str, options: Sequence[str], labels: Sequence[str], *,
            inline: bool = False, instruction: str | None = None) -> str:
    if inline:
        body = " | ".join(f"({lab}) {opt}" for lab, opt in zip(labels, options, strict=True))
    else:
        body = "\n".join(f"{lab}. {opt}" for lab, opt in zip(labels, options, strict=True))
    ask = instruction or f"Answer with the letter of the correct option ({labels[0]}-{labels[-1]}) only."
    return f"{question}\n\n{body}\n\n{ask}"


def original(item: MCItem) -> Variant:
    """The unperturbed prompt."""
    labels = LETTERS[: len(item.options)]
    return Variant(item.id, "original", _render(f"Question: {item.question}", item.options,
                                                labels), labels, item.answer)


def perturb(item: MCItem, kind: str, *, seed: int = 0) -> Variant:
    """Render ``item`` under perturbation ``kind``; the answer key follows the options.

    Examples
    --------
    >>> it = MCItem("q1", "2 + 2 = ?", ("3", "4", "5"), 1)
    >>> v = perturb(it, "shuffle", seed=0)
    >>> v.labels[v.answer] in v.prompt and it.options[1] in v.prompt
    True
    """
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {KINDS}, got {kind!r}")
    rng = _item_rng(seed, item.id, kind)
    labels = LETTERS[: len(item.options)]
    if kind == "paraphrase":
        q = _PARAPHRASES[int(rng.integers(len(_PARAPHRASES)))].format(q=item.question)
        return Variant(item.id, kind, _render(q, item.options, labels), labels, item.answer)
    if kind == "shuffle":
        k = len(item.options)
        perm = rng.permutation(k)
        while k > 1 and np.array_equal(perm, np.arange(k)):
            perm = rng.permutation(k)
        opts = [item.options[i] for i in perm]
        answer = int(np.flatnonzero(perm == item.answer)[0])
        return Variant(item.id, kind, _render(f"Question: {item.question}", opts, labels),
                       labels, answer)
    if kind == "format":
        nums = tuple(str(i + 1) for i in range(len(item.options)))
        prompt = _render(f"Q: {item.question}", item.options, nums, inline=True,
                         instruction=f"Reply with the number (1-{len(nums)}) of the correct "
                                     "option and nothing else.")
        return Variant(item.id, kind, prompt, nums, item.answer)
    noise = _NOISE[int(rng.integers(len(_NOISE)))]
    return Variant(item.id, kind, _render(f"Question: {item.question} {noise}", item.options,
                                          labels), labels, item.answer)


def parse_answer(text: str, labels: Sequence[str]) -> int | None:
    """Index of the option the reply names, or None when no label can be read.

    Examples
    --------
    >>> parse_answer("The answer is (C).", "ABCD"), parse_answer("2", "123"), parse_answer("?", "AB")
    (2, 1, None)
    """
    alt = "|".join(re.escape(lab) for lab in sorted(labels, key=len, reverse=True))
    s = text.strip()
    for pattern in (rf"^\(?({alt})\)?[.):]?$", rf"answer\s*(?:is|:)?\s*\(?({alt})\b",
                    rf"^\(?({alt})[\).:]", rf"(?<![\w'])\(?({alt})\)?(?![\w'])"):
        m = re.search(pattern, s, flags=re.IGNORECASE if labels[0].isdigit() else 0)
        if m:
            return list(labels).index(m.group(1))
    return None


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


@dataclass(frozen=True)
class Outcome:
    """The scored answer to one variant."""

    item_id: str
    kind: str
    variant: str
    correct: bool
    parsed: int | None
    reply: str


@dataclass(frozen=True)
class FlipStat:
    """Flips among (item, kind) pairs answered right in the original form, with a Wilson CI."""

    kind: str
    base: int
    flips: int
    rate: float
    ci_low: float
    ci_high: float
    accuracy_perturbed: float


def flip_stat(kind: str, flips: int, base: int, acc: float, *, confidence: float = 0.95) -> FlipStat:
    """Flip rate flips/base with scipy's Wilson score interval (NaN when base = 0)."""
    if base == 0:
        return FlipStat(kind, 0, 0, math.nan, math.nan, math.nan, acc)
    ci = binomtest(flips, base).proportion_ci(confidence_level=confidence, method="wilson")
    return FlipStat(kind, base, flips, flips / base, float(ci.low), float(ci.high), acc)


def flip_alarm(rate: float) -> bool:
    """The alarm rule: a flip rate above 10 % (an undefined rate, NaN, never alarms)."""
    return bool(rate > ALARM_FLIP_RATE)


@dataclass(frozen=True)
class StabilityReport:
    """Outcomes of every variant plus flip rates overall and per perturbation."""

    model: str
    n_items: int
    kinds: tuple[str, ...]
    seed: int
    accuracy_original: float
    overall: FlipStat
    per_kind: tuple[FlipStat, ...]
    retries: int
    outcomes: tuple[Outcome, ...] = field(repr=False)

    @property
    def alarm(self) -> bool:
        """True when the overall flip rate exceeds the 10 % alarm level."""
        return flip_alarm(self.overall.rate)

    @property
    def alarm_confirmed(self) -> bool:
        """True when even the Wilson lower bound exceeds 10 %."""
        return flip_alarm(self.overall.ci_low)

    def events(self, *, benchmark: str, run_id: str | None = None) -> list[dict[str, Any]]:
        """ItemResult-shaped dicts (score 1/0) for the live monitor, one per variant."""
        out = []
        for o in self.outcomes:
            ev: dict[str, Any] = {"benchmark": benchmark, "item_id": o.item_id,
                                  "model": self.model, "score": 1.0 if o.correct else 0.0,
                                  "variant": o.variant}
            if run_id is not None:
                ev["run_id"] = run_id
            out.append(ev)
        return out

    def to_dict(self, *, outcomes: bool = False) -> dict[str, Any]:
        """JSON-able summary."""
        out: dict[str, Any] = {
            "model": self.model, "n_items": self.n_items, "kinds": list(self.kinds),
            "seed": self.seed, "accuracy_original": self.accuracy_original,
            "flip_rate": self.overall.rate, "flip_ci": [self.overall.ci_low, self.overall.ci_high],
            "flips": self.overall.flips, "flip_base": self.overall.base,
            "alarm_level": ALARM_FLIP_RATE, "alarm": self.alarm,
            "alarm_confirmed": self.alarm_confirmed, "retries": self.retries,
            "per_kind": [s.__dict__ for s in self.per_kind],
        }
        if outcomes:
            out["outcomes"] = [o.__dict__ for o in self.outcomes]
        return out


async def run_stability(
    items: Sequence[MCItem],
    adapter: ModelAdapter,
    *,
    kinds: Sequence[str] = KINDS,
    seed: int = 0,
    concurrency: int = 8,
) -> StabilityReport:
    """Ask ``adapter`` every original and perturbed variant and compute flip rates.

    Any variant that still fails after the adapter's retries aborts the run with an
    AdapterError naming the item: a flip rate over silently dropped items would be biased.
    """
    if concurrency < 1:
        raise ValueError(f"`concurrency` must be at least 1, got {concurrency}")
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise ValueError(f"`kinds` must be a non-empty subset of {KINDS}, got {list(kinds)}")
    variants = [v for it in items for v in (original(it), *(perturb(it, k, seed=seed)
                                                              for k in kinds))]
    sem = asyncio.Semaphore(concurrency)

    async def ask(v: Variant) -> Outcome:
        async with sem:
            reply = await adapter.complete(Query(v.item_id, v.kind, v.prompt, v.labels))
        parsed = parse_answer(reply, v.labels)
        return Outcome(v.item_id, v.kind, v.variant, parsed == v.answer, parsed, reply)

    tasks = [asyncio.ensure_future(ask(v)) for v in variants]
    try:
        outcomes = await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        await adapter.aclose()
    by = {(o.item_id, o.kind): o for o in outcomes}
    right0 = [it.id for it in items if by[(it.id, "original")].correct]
    per_kind = []
    for k in kinds:
        flips = sum(not by[(i, k)].correct for i in right0)
        acc = sum(by[(it.id, k)].correct for it in items) / len(items)
        per_kind.append(flip_stat(k, flips, len(right0), acc))
    all_flips = sum(s.flips for s in per_kind)
    all_acc = sum(s.accuracy_perturbed for s in per_kind) / len(per_kind)
    overall = flip_stat("all", all_flips, len(right0) * len(kinds), all_acc)
    return StabilityReport(adapter.name, len(items), tuple(kinds), seed,
                           len(right0) / len(items), overall, tuple(per_kind),
                           int(getattr(adapter, "retried", 0)), tuple(outcomes))
