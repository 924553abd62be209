"""The board's one guarantee, checked on the live core: models arrive over time, every pair
is read after every small batch, and no pair may ever read resolved falsely.

Each board is one benchmark fed to a real :class:`monitor.core.Monitor`. It starts with two
models and gains one every ``every`` items (the first two are exactly tied, the worst case
the issue found); several models are exactly tied, the others differ by 0.05–0.10 in
accuracy. Scores come from a shared item difficulty, so models are correlated item by item:
model j scores 1{a_j − d_i + e_ij > 0} (0/1), Φ(a_j − d_i + e_ij) (bounded), or — for the
models in ``partial`` on 5 % of items — the mean of two such 0/1 draws (a 0.5 when they
disagree; the mean is unchanged, so ties stay exact). Equal a_j means equal true accuracy and
the true order is that of a_j in every setting. Items arrive in random order (they are
i.i.d.), the results of an item in random model order, shuffled locally across neighbouring
items, and are posted to ``Monitor.apply`` in batches of 10–50 results.

After every batch the verdict of every pair (not only adjacent ones) and the rank sets are
read from the table the core evaluates for that read (``Monitor.table``: ``PairTable.code`` is
what ``Monitor.pairs(bench, "all")`` prints as ``verdict``, ``PairTable.rank_sets`` what
``Monitor.ranking`` prints as ``rank_low``/``rank_high``). Those two routes also compute the
confidence sequences by bisection for every pair they return (10–50 ms a call), so they are
called, and checked equal to the cheap read, at every model arrival on the first boards of a
setting and at the end of every 10th board. The batches are applied with ``evaluate=False``
and evaluated by the read (as a runner on a cadence does): the change events' figures need
root finding too; the change stream is checked over HTTP by
tests/integration/test_embedded_ranking_stream.py.

Counted per board: a *false resolution* (any pair ever read resolved while its models are
tied, or the wrong way round), rank-set *coverage* at every read (every present model's true
rank, 1 + #present models with strictly higher accuracy, inside [rank_low, rank_high]), and
*reversals* (a pair once read resolved reading otherwise later; none allowed).
``CoreConfig(planned_models=M)`` with M the board's final size: its M(M − 1)/2 pairs share
α/2 (monitor/stats/sequential.py), so α/2 is what this design spends on these boards, the
other half being kept for models beyond the plan. Power (share of the pairs with a real gap
resolved the right way round by the end) is printed, not asserted beyond "not nil".

Printed by ``python -m tests.statistical.test_board_guarantee`` (also the slow test's output
under ``pytest -s``).
"""

from __future__ import annotations

import itertools
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.stats import norm

from monitor.contracts import ItemResult
from monitor.core.config import CoreConfig
from monitor.core.monitor import Monitor

ALPHA = 0.05
BOARDS = 400
SEED = 20240901
PARTIAL_RATE = 0.05  # share of items on which a partial-credit model may give 0.5
# The slow routes are compared with the read at every arrival on the first 3 boards of a
# setting, and at the end of every 10th board.
CHECK_SLOW_ROUTES = (3, 10)
BIG_GAP = 0.15  # power is printed for gaps of 0.10 and of 0.20 (and more) separately
BENCH = "board"
BATCH = (30, 50)  # results per posted batch (uniform)


def _a(accuracy: float) -> float:
    """Latent ability of a 0/1 model with this accuracy: P(a − d + e > 0) = Φ(a/√2)."""
    return float(math.sqrt(2.0) * norm.ppf(accuracy))


# Accuracies (0/1 scale) in arrival order: the first two tied; ties at 0.60, 0.70 and 0.50
# (8 of the 28 pairs tied; 14 of the 45 with ten models).
EIGHT = tuple(_a(p) for p in (0.60, 0.60, 0.70, 0.60, 0.50, 0.70, 0.60, 0.50))
TEN = (*EIGHT, _a(0.70), _a(0.60))


@dataclass(frozen=True)
class Setting:
    name: str
    ability: tuple[float, ...]  # a_j in arrival order
    scores: str  # "binary", "mixed" or "bounded"
    every: int = 100  # items between two arrivals
    tail: int = 100  # items after the last arrival
    partial: tuple[int, ...] = ()  # models (arrival index) giving some 0.5 scores

    @property
    def models(self) -> int:
        return len(self.ability)


SETTINGS = (
    Setting("(a) 0/1, 8 models, correlated", EIGHT, "binary"),
    Setting("(b) 0/1, 10 models", TEN, "binary", every=80),
    Setting("(c) mixed: 0/1 + some 0.5", EIGHT, "mixed", partial=(1, 3, 6)),
    Setting("(d) bounded scores in [0, 1]", EIGHT, "bounded"),
)


@dataclass(frozen=True)
class BoardResult:
    false_resolution: bool  # some pair read resolved while tied or the wrong way round
    wrong_direction: bool  # of those, a pair with a real gap resolved the wrong way round
    covered: bool  # every true rank inside its rank set at every read
    reversals: int  # reads where a pair once resolved read otherwise (must be 0)
    gap_pairs: int  # pairs with a real gap at the end
    gap_resolved: int  # of those, resolved the right way round by the end
    big_pairs: int  # pairs with a gap of at least BIG_GAP (0/1 accuracy scale)
    big_resolved: int
    reads: int
    results: int


def _scores(s: Setting, rng: np.random.Generator, n_items: int) -> np.ndarray:
    """(items × models) scores of one board, rows in arrival order of the items."""
    ab = np.asarray(s.ability)[None, :]
    difficulty = rng.normal(size=(n_items, 1))
    latent = ab - difficulty + rng.normal(size=(n_items, ab.size))
    if s.scores == "bounded":
        return np.asarray(norm.cdf(latent))
    x = (latent > 0).astype(float)
    if s.scores == "mixed":
        # The mean of two independent draws of the same model on the same item: 0, 0.5 or 1,
        # with the model's accuracy unchanged (so its ties stay exact).
        cols = list(s.partial)
        second = (ab[:, cols] - difficulty + rng.normal(size=(n_items, len(cols)))) > 0
        use = rng.random((n_items, len(cols))) < PARTIAL_RATE
        x[:, cols] = np.where(use, (x[:, cols] + second) / 2.0, x[:, cols])
    return x


def _stream(s: Setting, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(item, model, score) of every result in posting order."""
    m = s.models
    arrival = np.r_[0, np.arange(m - 1) * s.every]  # item at which each model arrives
    n_items = int(arrival[-1]) + s.tail
    x = _scores(s, rng, n_items)
    item, model = np.nonzero(np.arange(n_items)[:, None] >= arrival[None, :])
    # Models of an item in random order, and results moved by up to ~2 items: the order is
    # random but never depends on a score.
    key = item * m + rng.permuted(np.tile(np.arange(m), (n_items, 1)), axis=1)[item, model]
    order = np.argsort(key + rng.uniform(0.0, 2.0 * m, size=key.size), kind="stable")
    item, model = item[order], model[order]
    return item, model, x[item, model]


def _slow_routes_agree(mon: Monitor, names: list[str], code: np.ndarray,
                       low: list[int], high: list[int], order: tuple[int, ...]) -> None:
    """``Monitor.pairs(…, "all")`` and ``Monitor.ranking`` show what the cheap read showed."""
    col = {n: i for i, n in enumerate(names)}
    pairs = [p.as_dict() for p in mon.pairs(BENCH, "all")]
    assert len(pairs) == len(order) * (len(order) - 1) // 2
    for p in pairs:
        a, b = col[p["model_a"]], col[p["model_b"]]
        want = ("unresolved" if code[a, b] == 0
                else f"resolved:{names[a] if code[a, b] > 0 else names[b]}")
        assert p["verdict"] == want, (p, want)
        assert (p["decided"] is None) == (want == "unresolved"), p
        if p["decided"] is not None:
            assert p["decided"]["n"] <= p["n"] and p["decided"]["e_value"] >= p["e_threshold"]
    ranking = mon.ranking(BENCH).to_json()
    assert [r["model"] for r in ranking["models"]] == [names[i] for i in order]
    assert [r["rank_low"] for r in ranking["models"]] == low
    assert [r["rank_high"] for r in ranking["models"]] == high
    assert ranking["anytime"]["planned_models"] == mon.config.planned_models


def run_board(s: Setting, board: int, *, seed: int = SEED, check_arrivals: bool = False,
              check_end: bool = True) -> BoardResult:
    """Post one board's stream to a fresh live core and read it after every batch."""
    rng = np.random.default_rng([seed, board, s.models, len(s.scores)])
    item, model, score = _stream(s, rng)
    ab = np.asarray(s.ability)
    truth = np.sign(ab[:, None] - ab[None, :]).astype(np.int8)  # +1: row model better
    acc = norm.cdf(ab / math.sqrt(2.0))  # accuracy on the 0/1 scale (gaps for the power)
    mon = Monitor(CoreConfig(alpha=ALPHA, planned_models=s.models))
    names = [f"m{j}" for j in range(s.models)]
    events = [ItemResult(benchmark=BENCH, item_id=f"i{i}", model=names[j], score=float(x))
              for i, j, x in zip(item.tolist(), model.tolist(), score.tolist(), strict=True)]
    cuts = np.cumsum(rng.integers(BATCH[0], BATCH[1] + 1, size=len(events) // BATCH[0] + 1))
    cuts = np.r_[0, cuts[cuts < len(events)], len(events)]

    seen = np.zeros((s.models, s.models), dtype=np.int8)  # verdicts read so far, by arrival
    false_res = wrong = False
    covered = True
    reversals = reads = 0
    present_before = 0
    for lo, hi in itertools.pairwise(cuts.tolist()):
        # Evaluated by the read, as a runner on a cadence does; evaluate=True would also
        # build the change events, whose figures (root finding) would double the runtime.
        mon.apply(events[lo:hi], evaluate=False)
        table = mon.table(BENCH)
        assert table is not None
        tnames = list(table.models)
        idx = np.asarray([int(n[1:]) for n in tnames])  # table column → arrival index
        now = np.zeros_like(seen)
        now[np.ix_(idx, idx)] = table.code
        reads += 1
        reversals += int(np.count_nonzero((seen != 0) & (now != seen)))
        bad = (now != 0) & (now != truth)
        false_res |= bool(bad.any())
        wrong |= bool((bad & (truth != 0)).any())
        seen = np.where(seen != 0, seen, now)

        low, high, _ = table.rank_sets()
        ranked = idx[list(table.order)]
        true_rank = 1 + (ab[ranked][None, :] > ab[ranked][:, None]).sum(axis=1)
        covered &= bool(np.all((np.asarray(low) <= true_rank) & (true_rank <= np.asarray(high))))
        if check_arrivals and len(table.order) > present_before:
            _slow_routes_agree(mon, tnames, table.code, low, high, table.order)
        present_before = len(table.order)

    table = mon.table(BENCH)
    assert table is not None and len(table.order) == s.models
    if check_end:
        low, high, _ = table.rank_sets()
        _slow_routes_agree(mon, list(table.models), table.code, low, high, table.order)
    gap = np.triu(truth != 0, 1)
    right = np.triu((seen == truth) & (truth != 0), 1)
    size = np.round(np.abs(acc[:, None] - acc[None, :]), 2)
    big = size >= BIG_GAP
    return BoardResult(false_resolution=false_res, wrong_direction=wrong, covered=covered,
                       reversals=reversals, gap_pairs=int(gap.sum()),
                       gap_resolved=int(right.sum()), big_pairs=int((gap & big).sum()),
                       big_resolved=int((right & big).sum()), reads=reads,
                       results=len(events))


def _chunk(args: tuple[Setting, list[int], int]) -> list[BoardResult]:
    s, boards, seed = args
    return [run_board(s, b, seed=seed, check_arrivals=b < CHECK_SLOW_ROUTES[0],
                      check_end=b % CHECK_SLOW_ROUTES[1] == 0) for b in boards]


@dataclass(frozen=True)
class Summary:
    setting: Setting
    boards: int
    false_rate: float
    wrong_rate: float
    coverage: float
    reversals: int
    power: float
    power_small: float  # gaps below BIG_GAP
    power_big: float
    reads: float
    results: float
    seconds: float

    def se(self, rate: float) -> float:
        """Monte-Carlo SE of a rate over the boards (1/boards when the rate is 0 or 1)."""
        return math.sqrt(rate * (1.0 - rate) / self.boards) or 1.0 / self.boards

    def line(self) -> str:
        return (f"{self.setting.name:32s} false {self.false_rate:.4f} ± "
                f"{self.se(self.false_rate):.4f} (wrong way {self.wrong_rate:.4f})  "
                f"coverage {self.coverage:.4f} ± {self.se(self.coverage):.4f}  "
                f"reversals {self.reversals}  power {self.power:.3f} (gap 0.10: "
                f"{self.power_small:.3f}, ≥ 0.20: {self.power_big:.3f})  "
                f"{self.reads:.0f} reads/board, {self.results:.0f} results/board, "
                f"{self.seconds:.0f} s")


def simulate(s: Setting, *, boards: int = BOARDS, seed: int = SEED,
             workers: int | None = None) -> Summary:
    """Run ``boards`` seeded boards of setting ``s`` (on up to two processes)."""
    workers = workers or min(2, os.cpu_count() or 1)
    t0 = time.perf_counter()
    chunks = [(s, list(range(w, boards, workers)), seed) for w in range(workers)]
    if workers == 1:
        out = _chunk(chunks[0])
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            out = [r for part in pool.map(_chunk, chunks) for r in part]
    return Summary(
        setting=s, boards=len(out),
        false_rate=float(np.mean([r.false_resolution for r in out])),
        wrong_rate=float(np.mean([r.wrong_direction for r in out])),
        coverage=float(np.mean([r.covered for r in out])),
        reversals=sum(r.reversals for r in out),
        power=sum(r.gap_resolved for r in out) / max(sum(r.gap_pairs for r in out), 1),
        power_small=(sum(r.gap_resolved - r.big_resolved for r in out)
                     / max(sum(r.gap_pairs - r.big_pairs for r in out), 1)),
        power_big=sum(r.big_resolved for r in out) / max(sum(r.big_pairs for r in out), 1),
        reads=float(np.mean([r.reads for r in out])),
        results=float(np.mean([r.results for r in out])),
        seconds=time.perf_counter() - t0,
    )


@pytest.mark.slow
@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name.split()[0])
def test_board_guarantee(setting: Setting) -> None:
    r = simulate(setting)
    print(r.line())
    assert r.reversals == 0, f"{setting.name}: a resolved pair read otherwise later ({r.line()})"
    se = r.se(r.false_rate)
    assert r.false_rate <= ALPHA + 2 * se, (
        f"{setting.name}: P(any false resolution) = {r.false_rate:.4f} > α + 2 SE = "
        f"{ALPHA} + 2 × {se:.4f} over {r.boards} boards")
    se_cov = r.se(r.coverage)
    assert r.coverage >= 1 - ALPHA - 2 * se_cov, (
        f"{setting.name}: anytime rank-set coverage {r.coverage:.4f} < 1 − α − 2 SE = "
        f"1 − {ALPHA} − 2 × {se_cov:.4f} over {r.boards} boards")
    # Not trivially safe: the boards do resolve real gaps.
    assert r.power > 0.1, r.line()


def _main() -> None:
    print(f"α = {ALPHA}, {BOARDS} boards per setting, seed {SEED}, "
          "planned_models = the board's final size")
    for s in SETTINGS:
        print(simulate(s).line(), flush=True)


if __name__ == "__main__":  # pragma: no cover
    _main()
