"""Unicode-aware word tokenisation and hashed word n-grams for the leakage scan.

Text is NFKC-normalised and casefolded; a token is a run of word characters (``\\w+``),
except that Han, Hiragana and Katakana characters are one token each, because those
scripts do not separate words with spaces.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

import numpy as np
from numpy.typing import NDArray

# Scripts written without spaces between words: one character = one token.
_CJK = (
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3400-\u4dbf"  # CJK Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\U00020000-\U0002ffff"  # CJK Extensions B-F
)
_TOKEN = re.compile(f"[{_CJK}]|(?:(?![{_CJK}])\\w)+")

# Fixed odd 64-bit multipliers, one per n-gram position: an n-gram's hash is the wrapping
# sum Σ_k h(token_{i+k}) · M_k, so n-grams are hashed with a few vectorised numpy ops.
_MULTIPLIERS = np.random.default_rng(20240517).integers(
    1, 2**63 - 1, size=64, dtype=np.int64
).astype(np.uint64) | np.uint64(1)



class _HashCache(dict[str, int]):
    """token → stable 64-bit hash; hits are plain dict lookups (C speed via map)."""

    def __missing__(self, token: str) -> int:
        # blake2b, not hash(): stable across processes (PYTHONHASHSEED) and machines.
        value = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
        if len(self) >= _CACHE_LIMIT:
            self.clear()
        self[token] = value
        return value


_CACHE_LIMIT = 4_000_000
_token_cache = _HashCache()


def tokenize(text: str) -> list[str]:
    """Split ``text`` into casefolded NFKC tokens; CJK characters are single tokens.

    Examples
    --------
    >>> tokenize("Ｔｈｅ Café's 東京タワー!")
    ['the', 'café', 's', '東', '京', 'タ', 'ワ', 'ー']
    """
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def token_hashes(tokens: list[str]) -> NDArray[np.uint64]:
    """Stable 64-bit hashes of the tokens, in order."""
    return np.array(list(map(_token_cache.__getitem__, tokens)), dtype=np.uint64)


def _check_n(n: int) -> None:
    if not 1 <= n <= len(_MULTIPLIERS):
        raise ValueError(f"`n` must lie in [1, {len(_MULTIPLIERS)}], got {n}")


def _rolling(th: NDArray[np.uint64], n: int) -> NDArray[np.uint64]:
    m = len(th) - n + 1
    out = np.zeros(max(m, 0), dtype=np.uint64)
    if m > 0:
        with np.errstate(over="ignore"):
            for k in range(n):
                out += th[k : k + m] * _MULTIPLIERS[k]
    return out


def corpus_ngrams(
    texts: list[str], n: int
) -> tuple[NDArray[np.uint64], NDArray[np.int64], NDArray[np.int64]]:
    """Distinct word n-gram hashes of many texts at once.

    Returns (hashes, text numbers, n-grams per text): pairs sorted by text then hash,
    each (text, n-gram) once. All texts are hashed in one vectorised pass; n-grams that
    would straddle two texts are dropped.
    """
    _check_n(n)
    th = [token_hashes(tokenize(t)) for t in texts]
    lens = np.fromiter((len(a) for a in th), dtype=np.int64, count=len(th))
    allt = np.concatenate(th) if th else np.empty(0, np.uint64)
    h = _rolling(allt, n)
    starts = np.cumsum(lens) - lens
    owner = np.repeat(np.arange(len(texts), dtype=np.int64), lens)[: len(h)]
    valid = np.arange(len(h)) - starts[owner] <= lens[owner] - n
    h, owner = h[valid], owner[valid]
    order = np.lexsort((h, owner))
    h, owner = h[order], owner[order]
    keep = np.r_[True, (h[1:] != h[:-1]) | (owner[1:] != owner[:-1])] if len(h) else \
        np.empty(0, dtype=bool)
    h, owner = h[keep], owner[keep]
    return h, owner, np.bincount(owner, minlength=len(texts)).astype(np.int64)


def ngram_hashes(tokens: list[str], n: int) -> NDArray[np.uint64]:
    """Sorted unique 64-bit hashes of the word ``n``-grams of ``tokens`` (empty if too short).

    Examples
    --------
    >>> len(ngram_hashes(tokenize("a b c a b c"), 3))  # abc, bca, cab
    3
    """
    _check_n(n)
    if len(tokens) < n:
        return np.empty(0, dtype=np.uint64)
    return np.unique(_rolling(token_hashes(tokens), n))
