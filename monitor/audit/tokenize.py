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

_token_cache: dict[str, int] = {}
_CACHE_LIMIT = 2_000_000


def tokenize(text: str) -> list[str]:
    """Split ``text`` into casefolded NFKC tokens; CJK characters are single tokens.

    Examples
    --------
    >>> tokenize("Ｔｈｅ Café's 東京タワー!")
    ['the', 'café', 's', '東', '京', 'タ', 'ワ', 'ー']
    """
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def _token_hash(token: str) -> int:
    value = _token_cache.get(token)
    if value is None:
        # blake2b, not hash(): stable across processes (PYTHONHASHSEED) and machines.
        value = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
        if len(_token_cache) < _CACHE_LIMIT:
            _token_cache[token] = value
    return value


def token_hashes(tokens: list[str]) -> NDArray[np.uint64]:
    """Stable 64-bit hashes of the tokens, in order."""
    return np.fromiter((_token_hash(t) for t in tokens), dtype=np.uint64, count=len(tokens))


def ngram_hashes(tokens: list[str], n: int) -> NDArray[np.uint64]:
    """Sorted unique 64-bit hashes of the word ``n``-grams of ``tokens`` (empty if too short).

    Examples
    --------
    >>> len(ngram_hashes(tokenize("a b c a b c"), 3))  # abc, bca, cab
    3
    """
    if not 1 <= n <= len(_MULTIPLIERS):
        raise ValueError(f"`n` must lie in [1, {len(_MULTIPLIERS)}], got {n}")
    m = len(tokens) - n + 1
    if m <= 0:
        return np.empty(0, dtype=np.uint64)
    th = token_hashes(tokens)
    out = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(n):
            out += th[k : k + m] * _MULTIPLIERS[k]
    return np.unique(out)
