"""Test-set leakage: word n-gram overlap of eval items against a candidate training corpus.

The corpus is indexed once (n-gram hash → sorted postings of document numbers); every eval
item is then scored against all documents that share at least one n-gram, in vectorised
batches. Per item we keep the best-matching document by containment (share of the item's
n-grams found in the document), with Jaccard as tie-break and as a second figure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from monitor.audit.tokenize import corpus_ngrams, ngram_hashes, tokenize

Progress = Callable[[int], None]
"""Called with the number of texts just processed (for progress bars)."""

STATUSES = ("clean", "review", "leak", "too-short")


def check_thresholds(review: float, leak: float) -> None:
    """Raise ValueError unless 0 < review ≤ leak ≤ 1."""
    if not 0.0 < review <= 1.0:
        raise ValueError(f"`threshold_review` must lie in (0, 1], got {review}")
    if not 0.0 < leak <= 1.0:
        raise ValueError(f"`threshold_leak` must lie in (0, 1], got {leak}")
    if review > leak:
        raise ValueError(f"`threshold_review` ({review}) must not exceed `threshold_leak` ({leak})")


def status_of(containment: float, n_ngrams: int, *, review: float, leak: float) -> str:
    """clean / review / leak by containment; too-short when the item has no n-gram."""
    if n_ngrams == 0:
        return "too-short"
    if containment >= leak:
        return "leak"
    if containment >= review:
        return "review"
    return "clean"


@dataclass(frozen=True)
class NgramIndex:
    """Inverted index of a corpus: sorted n-gram hashes → postings (document numbers)."""

    n: int
    keys: NDArray[np.uint64]
    offsets: NDArray[np.int64]
    postings: NDArray[np.int32]
    doc_sizes: NDArray[np.int64]
    doc_ids: tuple[str, ...]

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)

    def nbytes(self) -> int:
        """Memory held by the index arrays."""
        return int(self.keys.nbytes + self.offsets.nbytes + self.postings.nbytes
                   + self.doc_sizes.nbytes)


def build_index(
    texts: Sequence[str],
    *,
    doc_ids: Sequence[str] | None = None,
    n: int = 13,
    progress: Progress | None = None,
) -> NgramIndex:
    """Index the distinct word ``n``-grams of every corpus text.

    Examples
    --------
    >>> idx = build_index(["a b c d", "x y z"], n=2)
    >>> idx.n_docs, int(idx.doc_sizes.sum())
    (2, 5)
    """
    if n < 1:
        raise ValueError(f"`n` must be at least 1, got {n}")
    ids = tuple(str(i) for i in (doc_ids if doc_ids is not None else range(len(texts))))
    if len(ids) != len(texts):
        raise ValueError("`doc_ids` must have one id per text")
    if len(texts) >= 2**31:
        raise ValueError("`texts`: at most 2**31 − 1 documents")
    chunk = 10_000
    parts_h: list[NDArray[np.uint64]] = []
    parts_d: list[NDArray[np.int32]] = []
    parts_s: list[NDArray[np.int64]] = []
    for lo in range(0, len(texts), chunk):
        block = list(texts[lo : lo + chunk])
        h, owner, sizes_block = corpus_ngrams(block, n)
        parts_h.append(h)
        parts_d.append((owner + lo).astype(np.int32))
        parts_s.append(sizes_block)
        if progress is not None:
            progress(len(block))
    sizes = np.concatenate(parts_s) if parts_s else np.empty(0, np.int64)
    hashes = np.concatenate(parts_h) if parts_h else np.empty(0, np.uint64)
    docs = np.concatenate(parts_d) if parts_d else np.empty(0, np.int32)
    del parts_h, parts_d
    # Stable: the pairs arrive in document order, so each postings list stays sorted.
    order = np.argsort(hashes, kind="stable")
    hashes = hashes[order]
    postings = docs[order]
    del order, docs
    if len(hashes):
        starts = np.flatnonzero(np.r_[True, hashes[1:] != hashes[:-1]])
    else:
        starts = np.empty(0, dtype=np.int64)
    keys = hashes[starts]
    offsets = np.append(starts, len(hashes)).astype(np.int64)
    return NgramIndex(n, keys, offsets, postings, sizes, ids)


@dataclass(frozen=True)
class ItemMatch:
    """The best-matching corpus document for one eval item."""

    item_id: str
    n_ngrams: int
    best_doc: str | None
    shared: int
    containment: float
    jaccard: float
    status: str


@dataclass(frozen=True)
class LeakageReport:
    """Per-item matches plus the settings that produced them."""

    n: int
    threshold_review: float
    threshold_leak: float
    n_docs: int
    method: str
    matches: tuple[ItemMatch, ...] = field(repr=False)
    notes: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        """Number of items per status."""
        out = dict.fromkeys(STATUSES, 0)
        for m in self.matches:
            out[m.status] += 1
        return out

    def leak_share(self) -> float:
        """Share of checkable (not too-short) items whose status is leak."""
        c = self.counts()
        denom = len(self.matches) - c["too-short"]
        return c["leak"] / denom if denom else float("nan")

    def flagged(self) -> list[ItemMatch]:
        """Items with status leak or review, highest containment first."""
        out = [m for m in self.matches if m.status in {"leak", "review"}]
        return sorted(out, key=lambda m: (-m.containment, -m.jaccard, m.item_id))

    def to_dict(self, *, items: bool = True) -> dict[str, object]:
        """JSON-able summary (and per-item rows when ``items``)."""
        out: dict[str, object] = {
            "n": self.n,
            "method": self.method,
            "threshold_review": self.threshold_review,
            "threshold_leak": self.threshold_leak,
            "n_items": len(self.matches),
            "n_docs": self.n_docs,
            "counts": self.counts(),
            "leak_share": self.leak_share(),
            "leak_suspects": [m.item_id for m in self.matches if m.status == "leak"],
            "notes": list(self.notes),
        }
        if items:
            out["items"] = [m.__dict__ for m in self.matches]
        return out


def best_matches(
    index: NgramIndex, item_hashes: Sequence[NDArray[np.uint64]]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """Best document per item: (doc number or −1, shared n-grams, containment, Jaccard).

    Fully vectorised over a batch of items: look every n-gram up in the index, expand the
    postings into (item, doc) pairs, count pairs, then pick per item the highest containment
    (ties: higher Jaccard, then lower document number).
    """
    k = len(item_hashes)
    sizes = np.fromiter((len(h) for h in item_hashes), dtype=np.int64, count=k)
    best_doc = np.full(k, -1, dtype=np.int64)
    shared = np.zeros(k, dtype=np.int64)
    cont = np.zeros(k, dtype=float)
    jac = np.zeros(k, dtype=float)
    if k == 0 or len(index.keys) == 0 or sizes.sum() == 0:
        return best_doc, shared, cont, jac
    allh = np.concatenate(item_hashes)
    owner = np.repeat(np.arange(k, dtype=np.int64), sizes)
    pos = np.searchsorted(index.keys, allh)
    pos_c = np.minimum(pos, len(index.keys) - 1)
    hit = (pos < len(index.keys)) & (index.keys[pos_c] == allh)
    pos = pos_c[hit]
    owner = owner[hit]
    start = index.offsets[pos]
    lengths = index.offsets[pos + 1] - start
    total = int(lengths.sum())
    if total == 0:
        return best_doc, shared, cont, jac
    # Postings of every hit, laid end to end: position j of run r is start[r] + j.
    run_start = np.cumsum(lengths) - lengths
    flat = np.arange(total, dtype=np.int64) - np.repeat(run_start - start, lengths)
    docs = index.postings[flat].astype(np.int64)
    items = np.repeat(owner, lengths)
    key = items * index.n_docs + docs
    ukey, inter = np.unique(key, return_counts=True)
    it = ukey // index.n_docs
    dc = ukey % index.n_docs
    c = inter / sizes[it]
    j = inter / (sizes[it] + index.doc_sizes[dc] - inter)
    order = np.lexsort((dc, -j, -c, it))
    it, dc, inter, c, j = it[order], dc[order], inter[order], c[order], j[order]
    first = np.flatnonzero(np.r_[True, it[1:] != it[:-1]])
    sel = it[first]
    best_doc[sel] = dc[first]
    shared[sel] = inter[first]
    cont[sel] = c[first]
    jac[sel] = j[first]
    return best_doc, shared, cont, jac


def scan(
    index: NgramIndex,
    items: Sequence[tuple[str, str]],
    *,
    threshold_review: float = 0.3,
    threshold_leak: float = 0.5,
    batch: int = 256,
    progress: Progress | None = None,
) -> LeakageReport:
    """Score every (item_id, text) against the indexed corpus.

    Examples
    --------
    >>> idx = build_index(["the quick brown fox jumps over the lazy dog"], n=3)
    >>> rep = scan(idx, [("q1", "The quick brown fox jumps!"), ("q2", "nothing alike here")])
    >>> [(m.item_id, m.status, m.containment) for m in rep.matches]
    [('q1', 'leak', 1.0), ('q2', 'clean', 0.0)]
    """
    check_thresholds(threshold_review, threshold_leak)
    if batch < 1:
        raise ValueError(f"`batch` must be at least 1, got {batch}")
    out: list[ItemMatch] = []
    for lo in range(0, len(items), batch):
        chunk = items[lo : lo + batch]
        hashes = [ngram_hashes(tokenize(text), index.n) for _, text in chunk]
        bd, sh, c, j = best_matches(index, hashes)
        for t, (item_id, _) in enumerate(chunk):
            size = len(hashes[t])
            doc = index.doc_ids[bd[t]] if bd[t] >= 0 else None
            cont = float(c[t])
            out.append(ItemMatch(item_id, size, doc, int(sh[t]), cont, float(j[t]),
                                 status_of(cont, size, review=threshold_review,
                                           leak=threshold_leak)))
        if progress is not None:
            progress(len(chunk))
    return LeakageReport(index.n, threshold_review, threshold_leak, index.n_docs, "exact",
                         tuple(out))


def scan_minhash(
    corpus: Sequence[tuple[str, str]],
    items: Sequence[tuple[str, str]],
    *,
    n: int = 13,
    threshold_review: float = 0.3,
    threshold_leak: float = 0.5,
    num_perm: int = 128,
    progress: Progress | None = None,
) -> LeakageReport:
    """Approximate scan with datasketch's MinHash LSH Ensemble (containment search).

    Each document is kept only as a MinHash sketch, so memory does not grow with document
    length. Candidates whose estimated containment reaches ``threshold_review`` are
    returned by the LSH Ensemble; containment is then estimated from the sketches,
    c = J (|A| + |B|) / ((1 + J) |A|), so figures are estimates, not exact counts.
    """
    from datasketch import LeanMinHash, MinHash, MinHashLSHEnsemble

    check_thresholds(threshold_review, threshold_leak)

    def sketch(h: NDArray[np.uint64]) -> LeanMinHash:
        m = MinHash(num_perm=num_perm, seed=1, hashfunc=int)
        m.update_batch((h & np.uint64(0xFFFFFFFF)).tolist())
        return LeanMinHash(m)

    doc_sketch: dict[str, tuple[LeanMinHash, int]] = {}
    for i, (doc_id, text) in enumerate(corpus):
        h = ngram_hashes(tokenize(text), n)
        if len(h):
            doc_sketch[doc_id] = (sketch(h), len(h))
        if progress is not None and (i + 1) % 1000 == 0:
            progress(1000)
    lsh = MinHashLSHEnsemble(threshold=threshold_review, num_perm=num_perm, num_part=16)
    lsh.index([(k, m, s) for k, (m, s) in doc_sketch.items()])
    out: list[ItemMatch] = []
    for item_id, text in items:
        h = ngram_hashes(tokenize(text), n)
        best: tuple[float, float, str] | None = None
        if len(h):
            q = sketch(h)
            for doc_id in lsh.query(q, len(h)):
                m, size = doc_sketch[doc_id]
                jj = float(q.jaccard(m))
                cc = min(1.0, jj * (len(h) + size) / ((1.0 + jj) * len(h)))
                cand = (cc, jj, str(doc_id))
                if best is None or (cand[0], cand[1]) > (best[0], best[1]):
                    best = cand
        cont, jac, doc = best if best is not None else (0.0, 0.0, None)
        shared = round(cont * len(h))
        out.append(ItemMatch(item_id, len(h), doc, shared, cont, jac,
                             status_of(cont, len(h), review=threshold_review,
                                       leak=threshold_leak)))
        if progress is not None:
            progress(1)
    return LeakageReport(n, threshold_review, threshold_leak, len(corpus), "minhash",
                         tuple(out))
