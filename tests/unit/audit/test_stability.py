"""Perturbations keep the answer key right; flip rates and Wilson CIs are computed correctly."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from monitor.audit import stability as st
from monitor.errors import InputError

ITEMS = [st.MCItem(f"q{i}", f"Which number is {i}?", (f"n{i + 1}", f"n{i}", f"n{i + 2}",
                                                       f"n{i + 3}", "other"), 1)
         for i in range(60)]


@pytest.mark.parametrize("kind", st.KINDS)
def test_every_perturbation_keeps_the_key(kind: str) -> None:
    for it in ITEMS:
        v = st.perturb(it, kind, seed=3)
        right = it.options[it.answer]
        label = v.labels[v.answer]
        if kind == "format":
            assert f"({label}) {right}" in v.prompt
        else:
            assert re.search(rf"^{label}\. {re.escape(right)}$", v.prompt, flags=re.M)
        assert v.prompt != st.original(it).prompt
        assert v.variant == f"perturbed:{kind}"


def test_shuffle_moves_options_and_is_seeded() -> None:
    moved = sum(st.perturb(it, "shuffle", seed=0).answer != it.answer for it in ITEMS)
    assert moved > 30  # 4 of 5 positions are new under a non-identity permutation
    assert st.perturb(ITEMS[0], "shuffle", seed=0) == st.perturb(ITEMS[0], "shuffle", seed=0)


def test_parse_answer() -> None:
    assert st.parse_answer("B", "ABCD") == 1
    assert st.parse_answer("(d)", "ABCD") is None  # labels are case-sensitive letters
    assert st.parse_answer("Answer: C", "ABCD") == 2
    assert st.parse_answer("A cat is not it; the answer is D.", "ABCD") == 3
    assert st.parse_answer("3", "1234") == 2
    assert st.parse_answer("no idea", "ABCD") is None


def test_flip_rate_and_wilson_ci_against_known_answers() -> None:
    rep = asyncio.run(st.run_stability(ITEMS, st.LocalAdapter(ITEMS, accuracy=0.75, flip=0.3,
                                                               seed=1)))
    by = {(o.item_id, o.kind): o.correct for o in rep.outcomes}
    right = [it.id for it in ITEMS if by[(it.id, "original")]]
    flips = sum(not by[(i, k)] for i in right for k in st.KINDS)
    assert rep.overall.flips == flips and rep.overall.base == 4 * len(right)
    # Wilson interval, closed form: (p + z²/2n ± z √(p(1−p)/n + z²/4n²)) / (1 + z²/n)
    n, p, z = rep.overall.base, flips / rep.overall.base, 1.959963984540054
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    assert rep.overall.ci_low == pytest.approx(centre - half, abs=1e-9)
    assert rep.overall.ci_high == pytest.approx(centre + half, abs=1e-9)
    assert rep.alarm  # flip 0.3 per perturbation is far above 10 %
    stable = asyncio.run(st.run_stability(ITEMS, st.LocalAdapter(ITEMS, accuracy=0.75, flip=0.0)))
    assert stable.overall.flips == 0 and not stable.alarm


def _write(tmp_path: Path, rows: list[object]) -> Path:
    p = tmp_path / "items.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_load_items_accepts_letters_indices_and_texts(tmp_path: Path) -> None:
    p = _write(tmp_path, [{"id": 1, "question": "q", "options": ["a", "b"], "answer": "B"},
                          {"id": 2, "question": "q", "options": ["a", "b"], "answer": 0},
                          {"id": 3, "question": "q", "options": ["a", "b"], "answer": "b"}])
    assert [it.answer for it in st.load_items(p)] == [1, 0, 1]


@pytest.mark.parametrize("row, message", [
    ({"id": 1, "question": "q", "options": ["a", "b"]}, "field 'answer': field missing"),
    ({"id": 1, "question": "q", "options": ["a", "b"], "answer": "Z"}, "neither an option"),
    ({"id": 1, "question": "q", "options": "ab", "answer": 0}, "list of at least two"),
])
def test_load_items_errors_name_line_and_field(tmp_path: Path, row: object, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        st.load_items(_write(tmp_path, [row]))
    assert "line 1" in str(err.value)
