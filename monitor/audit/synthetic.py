"""Seeded synthetic texts for leakage tests and benchmarks: a random-word corpus with planted copies."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def vocabulary(size: int = 20_000, *, rng: np.random.Generator) -> list[str]:
    """Pseudo-words of 3–9 lowercase letters."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(3, 10, size=size)
    return ["".join(letters[rng.integers(0, 26, size=k)]) for k in lengths]


def random_text(vocab: list[str], n_words: int, *, rng: np.random.Generator) -> str:
    """Words drawn Zipf-like (rank^-1.1) from ``vocab``, so some n-grams recur as in prose."""
    ranks = (rng.zipf(1.1, size=n_words) - 1) % len(vocab)
    return " ".join(vocab[r] for r in ranks)


def light_edit(text: str, *, rng: np.random.Generator, every: int = 20) -> str:
    """Substitute one word in every ``every`` words and change the casing/punctuation."""
    words = text.split()
    for i in range(int(rng.integers(0, every)), len(words), every):
        words[i] = "edited"
    out = " ".join(words)
    return out[:1].upper() + out[1:] + "?"


@dataclass(frozen=True)
class PlantedCorpus:
    """Eval items, a corpus, and which item was planted (verbatim or edited) in which doc."""

    items: list[tuple[str, str]]
    corpus: list[tuple[str, str]]
    planted: dict[str, str]  # item_id -> doc_id
    edited: frozenset[str]


def planted_corpus(
    *,
    n_items: int,
    n_docs: int,
    n_planted: int,
    item_words: int = 40,
    doc_words: int = 60,
    rng: np.random.Generator,
) -> PlantedCorpus:
    """Random eval items and documents; ``n_planted`` items are copied into documents.

    Half of the planted copies are verbatim, half lightly edited (see :func:`light_edit`),
    each embedded in the middle of surrounding random text.
    """
    vocab = vocabulary(rng=rng)
    items = [(f"item-{i}", random_text(vocab, item_words, rng=rng)) for i in range(n_items)]
    corpus = [(f"doc-{j}", random_text(vocab, doc_words, rng=rng)) for j in range(n_docs)]
    who = rng.choice(n_items, size=n_planted, replace=False)
    where = rng.choice(n_docs, size=n_planted, replace=False)
    planted: dict[str, str] = {}
    edited: set[str] = set()
    for k, (i, j) in enumerate(zip(who, where, strict=True)):
        item_id, text = items[i]
        if k % 2:
            text = light_edit(text, rng=rng)
            edited.add(item_id)
        doc_id, doc = corpus[j]
        words = doc.split()
        half = len(words) // 2
        corpus[j] = (doc_id, " ".join([*words[:half], text, *words[half:]]))
        planted[item_id] = doc_id
    return PlantedCorpus(items, corpus, planted, frozenset(edited))
