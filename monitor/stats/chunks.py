"""Elementwise solves of many pairs, a chunk at a time, on the cores this process may use.

The root finders of the anytime layer (:func:`monitor.stats.eprocess.cs_bounded`,
:func:`monitor.stats.anytime_size.n_star_anytime`) solve each element on its own, so a chunk's
result does not depend on the other chunks, and their arithmetic is numpy and scipy.special
ufuncs, which release the GIL: a whole board's 499,500 pairs are solved by as many threads
as the process has cores, with the same floats as one thread, under the caller's numpy error
state.
"""

from __future__ import annotations

import os
from collections.abc import Callable


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def each_chunk(solve: Callable[[slice], None], size: int, chunk: int) -> None:
    """``solve(at)`` for the slices ``at`` of ``range(size)`` ``chunk`` long; ``solve`` writes
    its results into its slice of arrays the caller holds. Several chunks go to a pool of
    threads, one per core (chunks are independent: the order they finish in does not
    matter)."""
    spans = [slice(lo, min(lo + chunk, size)) for lo in range(0, size, chunk)]
    workers = min(cores(), len(spans))
    if workers <= 1:
        for at in spans:
            solve(at)
        return
    from concurrent.futures import ThreadPoolExecutor

    # Each chunk runs under the caller's numpy error state (np.errstate), which a pool's
    # thread would otherwise not see (a context variable in numpy 2, per thread in 1.x).
    import numpy as np

    err = np.geterr()

    def run(at: slice) -> None:
        with np.errstate(**err):
            solve(at)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm-monitor-solve") as pool:
        for _ in pool.map(run, spans):  # re-raises errors
            pass
