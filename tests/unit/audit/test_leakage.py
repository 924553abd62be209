"""Leakage scan: planted copies are found, unrelated text is not flagged, CJK works."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.audit import leakage as lk
from monitor.audit.synthetic import planted_corpus, random_text, vocabulary
from monitor.audit.tokenize import ngram_hashes, tokenize


def test_tokenize_unicode() -> None:
    # NFKC folds full-width letters, casefold lowers (ß → ss), CJK characters are tokens.
    assert tokenize("ＡＢＣ Straße") == ["abc", "strasse"]
    assert tokenize("北京は日本語テスト") == list("北京は日本語テスト")
    assert tokenize("don't, 3.14") == ["don", "t", "3", "14"]


def test_ngram_hashes_are_order_sensitive_and_stable() -> None:
    a = ngram_hashes(["a", "b", "c"], 3)
    b = ngram_hashes(["c", "b", "a"], 3)
    assert len(a) == 1 and a[0] != b[0]
    assert ngram_hashes(["a", "b"], 3).size == 0
    with pytest.raises(ValueError, match="`n`"):
        ngram_hashes(["a"], 0)


@pytest.mark.parametrize("n", [5])
def test_planted_copies_recall_and_no_false_leak(n: int) -> None:
    pc = planted_corpus(n_items=300, n_docs=5000, n_planted=40, rng=np.random.default_rng(7))
    idx = lk.build_index([t for _, t in pc.corpus], doc_ids=[d for d, _ in pc.corpus], n=n)
    rep = lk.scan(idx, pc.items, threshold_review=0.3, threshold_leak=0.5)
    by_id = {m.item_id: m for m in rep.matches}
    for item_id, doc_id in pc.planted.items():
        m = by_id[item_id]
        assert m.status == "leak", (item_id, m)
        assert m.best_doc == doc_id
        if item_id not in pc.edited:
            assert m.containment == 1.0
    clean = [m for m in rep.matches if m.item_id not in pc.planted]
    assert all(m.status == "clean" for m in clean)
    assert rep.counts()["leak"] == len(pc.planted)
    assert len(pc.edited) == 20


def test_exact_scores_match_a_set_computation() -> None:
    rng = np.random.default_rng(3)
    vocab = vocabulary(200, rng=rng)  # small vocabulary: many partial overlaps
    docs = [random_text(vocab, 30, rng=rng) for _ in range(60)]
    items = [(f"q{i}", random_text(vocab, 12, rng=rng)) for i in range(25)]
    idx = lk.build_index(docs, n=2)
    rep = lk.scan(idx, items, batch=7)
    for (_, text), m in zip(items, rep.matches, strict=True):
        q = set(ngram_hashes(tokenize(text), 2).tolist())
        scores = []
        for j, d in enumerate(docs):
            s = set(ngram_hashes(tokenize(d), 2).tolist())
            inter = len(q & s)
            scores.append((inter / len(q), inter / len(q | s), -j))
        c, jac, negj = max(scores)
        if c == 0:
            assert m.best_doc is None
            continue
        assert m.best_doc == str(-negj)
        assert m.containment == pytest.approx(c)
        assert m.jaccard == pytest.approx(jac)


def test_cjk_items_are_found() -> None:
    doc = "背景文字很多。大型语言模型的评测集合不应该出现在训练语料里面，否则分数会虚高。结尾。"
    idx = lk.build_index([doc, "完全无关的另一段中文内容，讲的是天气和食物。"], n=5)
    rep = lk.scan(idx, [("zh", "大型语言模型的评测集合不应该出现在训练语料里面"),
                        ("ja", "今日はとても良い天気ですね、散歩に行きましょう")])
    zh, ja = rep.matches
    assert zh.status == "leak" and zh.best_doc == "0" and zh.containment == 1.0
    assert ja.status == "clean"


@pytest.mark.slow
def test_minhash_option_finds_verbatim_copies() -> None:
    pc = planted_corpus(n_items=40, n_docs=800, n_planted=6, rng=np.random.default_rng(11))
    rep = lk.scan_minhash(pc.corpus, pc.items, n=5)
    found = {m.item_id: m for m in rep.matches if m.status == "leak"}
    for item_id, doc_id in pc.planted.items():
        if item_id not in pc.edited:
            assert found[item_id].best_doc == doc_id
    assert all(m.item_id in pc.planted for m in found.values())


def test_threshold_validation() -> None:
    idx = lk.build_index(["a b c"], n=2)
    with pytest.raises(ValueError, match="threshold_review"):
        lk.scan(idx, [("x", "a b")], threshold_review=0.6, threshold_leak=0.5)
