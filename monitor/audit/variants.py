"""Multiple-choice items for the stability audit: reading them, rendering the original and
perturbed prompts (the answer key follows the options), and reading a model's reply."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from monitor.audit.textio import read_jsonl
from monitor.defaults import STABILITY_KINDS
from monitor.errors import InputError

KINDS = STABILITY_KINDS
LETTERS = tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


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
