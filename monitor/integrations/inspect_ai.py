"""inspect_ai that evaluates until resolved: an early-stopping manager that posts every
completed sample's score to a running monitor and skips the samples left once the monitor
says the model's place on the board is settled (docs/until-resolved.md, "inspect_ai").

Needs inspect_ai ≥ 0.3.80 (``pip install 'llm-monitor[inspect]'``), imported only when a task
runs, so the rest of llm-monitor never imports it. Example (``mockllm`` stands for any model)::

    from inspect_ai import Task, eval
    from inspect_ai.dataset import json_dataset
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate
    from monitor.integrations.inspect_ai import MonitorEarlyStopping, in_plan_order

    dataset = in_plan_order(json_dataset("arith.jsonl"), "arith")  # the monitor's item order
    task = Task(name="arith", dataset=dataset, solver=generate(), scorer=match(),
                early_stopping=MonitorEarlyStopping("http://127.0.0.1:8000"))
    eval(task, model="mockllm/model")

The mapping is that of ``llm-monitor post`` for an inspect_ai log (monitor.io.inspect):
benchmark = the task's name, model = the eval's model, item_id = the sample id, score = the
first scorer's value as a number (``C`` → 1, ``I`` → 0, …), sample = epoch − 1, k = epochs.

Why the stop costs nothing statistically, and what it does not save: the monitor's decisions
are anytime-valid, so stopping on them is one more stopping time; they assume the items arrive
in an order independent of their outcomes, which inspect's sample order is when the dataset is
in the monitor's fixed order (:func:`in_plan_order`) or shuffled with a seed
(``dataset.shuffle(seed=…)``), before any sample is run. inspect runs every sample's first
epoch before any second one, and the monitor counts an item once its K samples are in, so with
``epochs`` > 1 the stop can only come during the last epoch: the saving is at most 1/epochs of
the run.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from monitor.client import ClientError, MonitorClient, PostReport
from monitor.core.plan import item_keys
from monitor.errors import MonitorError

if TYPE_CHECKING:
    from inspect_ai.dataset import Dataset, MemoryDataset, Sample
    from inspect_ai.log import EvalSpec
    from inspect_ai.scorer import SampleScore
    from inspect_ai.util import EarlyStop

log = logging.getLogger(__name__)

#: The manager's name in the log's early-stopping summary.
NAME = "llm-monitor"
#: Completed samples between two posts (each followed by a plan request), by default.
EVERY = 100

#: Why a completed sample was not posted (the ``passed_over`` counts of the task's metadata).
NO_SCORE = "no score of the scorer"
NOT_A_NUMBER = "score not a number in [0, 1]"


def in_plan_order(dataset: Dataset | Iterable[Sample], benchmark: str) -> MemoryDataset:
    """The samples of ``dataset`` in the monitor's fixed random order of ``benchmark`` (the
    order of the plan's ``next_items``: a keyed hash of each sample id with the benchmark's
    name), so inspect runs them in the order the monitor hands out items.

    Every sample needs an id (``Sample(id=…)``, or a dataset field mapped to it), and the
    ids must be unique: they are the items on the board.
    """
    from inspect_ai.dataset import MemoryDataset

    samples = list(dataset)
    ids = [s.id for s in samples]
    missing = [i for i, sid in enumerate(ids) if sid is None]
    if missing:
        raise ValueError(f"`dataset`: sample {missing[0]} has no id; the monitor's order is "
                         "an order of item ids (give every Sample an id)")
    names = [str(sid) for sid in ids]
    if len(set(names)) != len(names):
        raise ValueError("`dataset`: sample ids are not unique; each id is one item")
    keys = item_keys(benchmark, names)
    order = sorted(range(len(samples)), key=lambda i: int(keys[i]))
    return MemoryDataset([samples[i] for i in order],
                         name=getattr(dataset, "name", None),
                         location=getattr(dataset, "location", None))


class MonitorEarlyStopping:
    """inspect_ai early stopping on a running monitor (``llm-monitor run``):
    ``Task(..., early_stopping=MonitorEarlyStopping(url))``.

    Every completed sample's score is posted; every ``every`` completed samples the pending
    scores are sent in one request (retried, acknowledged by the monitor) and the model's plan
    is asked (``GET /v1/benchmarks/{benchmark}/models/{model}/plan``). Once the plan says stop,
    every sample not yet started is skipped with an ``EarlyStop`` giving the plan's reason.
    The samples already running finish and are posted. When the task ends, the scores not yet
    sent are sent, and the task fails (ClientError) if the monitor does not acknowledge them:
    nothing evaluated is left unposted without saying so (the log still holds every sample,
    and ``llm-monitor post LOG --url URL`` sends them again; the monitor counts what it holds
    as duplicates). The task's log keeps the account under the early-stopping metadata.

    Parameters
    ----------
    url : str
        The monitor's base URL, e.g. ``http://127.0.0.1:8000``.
    benchmark, model : str, optional
        The names on the board; by default the task's name and the eval's model.
    scorer : str, optional
        The scorer whose value is the score; by default the first of each sample's scores.
    cluster_field : str, optional
        A sample metadata field sent as each result's cluster (e.g. ``subject``).
    against, top, budget
        Narrow the question the plan answers (``llm-monitor plan --help``): settled against
        these models only, settled in or out of the top K, stop after this many items.
    every : int
        Completed samples between two posts and plan requests (default 100). Asking more
        often costs a request, never validity: the monitor's decisions are anytime-valid.
    token : str, optional
        The monitor's bearer token.
    client : MonitorClient, optional
        A client with other retry or timeout options (then ``url`` and ``token`` are its own).

    One manager serves one task run at a time: an ``eval`` of one task on several models
    needs one Task (and manager) per model, as inspect gives the manager no way to tell the
    runs apart.
    """

    def __init__(self, url: str, *, benchmark: str | None = None, model: str | None = None,
                 scorer: str | None = None, cluster_field: str | None = None,
                 against: Sequence[str] | None = None, top: int | None = None,
                 budget: int | None = None, every: int = EVERY, token: str | None = None,
                 client: MonitorClient | None = None) -> None:
        if every < 1:
            raise ValueError(f"`every` must be at least 1, got {every}")
        self.client = client if client is not None else MonitorClient(url, token=token)
        self.benchmark = benchmark
        self.model = model
        self.scorer = scorer
        self.cluster_field = cluster_field
        self.against = list(against) if against is not None else None
        self.top = top
        self.budget = budget
        self.every = every
        self._running = False
        self._reset()

    def _reset(self) -> None:
        self._bench = ""
        self._name = ""
        self._epochs = 1
        self._pending: list[tuple[dict[str, Any], str]] = []
        self._since = 0  # completed samples since the last post
        self._completed = 0
        self._report = PostReport()
        self._plans = 0
        self._plan: dict[str, Any] | None = None  # the last plan received
        self._stop: dict[str, Any] | None = None  # the plan that said stop
        self._stopped_after: int | None = None  # results the monitor held when it did
        self._skipped = 0
        self._passed: dict[str, int] = {}
        self._warned: set[str] = set()
        self._lock: Any = None

    # -- the EarlyStopping protocol (inspect_ai.util.EarlyStopping) -------------------------
    async def start_task(self, task: EvalSpec, samples: list[Sample], epochs: int) -> str:
        """Name the benchmark and model, and ask the plan once: a model already settled on
        the board runs no sample at all."""
        import anyio

        if self._running:
            raise MonitorError("this MonitorEarlyStopping is already serving a task run: give "
                               "each task (and each model of an eval) its own manager")
        self._reset()
        self._running = True
        self._lock = anyio.Lock()
        self._bench = self.benchmark or str(task.task)
        self._name = self.model or str(task.model)
        self._epochs = max(int(epochs), 1)
        await self._ask()
        return NAME

    async def schedule_sample(self, id: str | int, epoch: int) -> EarlyStop | None:
        """``EarlyStop`` once the monitor has said stop, else None (run the sample)."""
        if self._stop is None:
            return None
        from inspect_ai.util import EarlyStop

        self._skipped += 1
        return EarlyStop(id=id, epoch=epoch, reason=f"{NAME}: {self._stop['reason']}")

    async def complete_sample(self, id: str | int, epoch: int,
                              scores: dict[str, SampleScore]) -> None:
        """Queue the sample's score; every ``every`` samples, post and ask the plan."""
        self._completed += 1
        event = self._event(id, epoch, scores)
        if event is not None:
            self._pending.append((event, f"sample {id}, epoch {epoch}"))
        self._since += 1
        if self._since >= self.every and self._stop is None:
            self._since = 0
            async with self._lock:
                if await self._flush(final=False):
                    await self._ask()

    async def complete_task(self) -> dict[str, Any]:
        """Send every score not yet acknowledged (ClientError when the monitor does not take
        them), ask the final plan, and return the account for the log."""
        try:
            async with self._lock:
                await self._flush(final=True)
                await self._ask()
            return self._summary()
        finally:
            self._running = False

    # -- internals -------------------------------------------------------------------------
    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s", message)

    def _pass_over(self, why: str, message: str) -> None:
        self._passed[why] = self._passed.get(why, 0) + 1
        self._warn_once(why, message)

    def _event(self, id: str | int, epoch: int, scores: dict[str, SampleScore]
               ) -> dict[str, Any] | None:
        from inspect_ai.scorer import value_to_float

        if self.scorer is None and scores:
            self.scorer = next(iter(scores))  # the first scorer, then the same one throughout
        s = scores.get(self.scorer) if self.scorer is not None else None
        if s is None:
            self._pass_over(NO_SCORE, f"{NAME}: sample {id!r} (epoch {epoch}) has no score of "
                            f"scorer {self.scorer!r} (scorers: {sorted(scores)}); not posted")
            return None
        value = s.score.value
        score = (float("nan") if isinstance(value, (dict, list))
                 else float(value_to_float()(value)))
        if not (math.isfinite(score) and 0.0 <= score <= 1.0):
            self._pass_over(NOT_A_NUMBER, f"{NAME}: sample {id!r} (epoch {epoch}): score "
                            f"{value!r} of scorer {self.scorer!r} is not a number in [0, 1]; "
                            "not posted")
            return None
        event: dict[str, Any] = {"benchmark": self._bench, "item_id": str(id),
                                 "model": self._name, "score": score, "sample": epoch - 1,
                                 "k": self._epochs}
        if self.cluster_field is not None:
            label = (s.sample_metadata or {}).get(self.cluster_field)
            if isinstance(label, (str, int, float)) and not isinstance(label, bool) and label != "":
                event["cluster"] = str(label)
            else:
                self._warn_once("cluster", f"{NAME}: sample {id!r} has no usable metadata "
                                f"field {self.cluster_field!r} ({label!r}); sent without cluster")
        return event

    async def _flush(self, *, final: bool) -> bool:
        """Post the pending scores; True when the monitor acknowledged them all. A failure is
        logged and the scores kept for the next post, except at the end, where it raises."""
        import anyio

        if not self._pending:
            return True
        batch, self._pending = self._pending, []
        into = PostReport()
        try:
            await anyio.to_thread.run_sync(lambda: self.client.post_labelled(batch, into=into))
        except ClientError as exc:
            # The batches the monitor answered are kept; the rest waits for the next post.
            sent = into.events
            self._fold(into)
            self._pending = batch[sent:] + self._pending
            if final:
                raise ClientError(
                    f"{NAME}: the monitor did not acknowledge {len(self._pending)} of this "
                    f"task's results ({exc}); the log holds them all: send them with "
                    f"`llm-monitor post LOG --url {self.client.url}`", status=exc.status
                ) from exc
            log.warning("%s: posting %d results failed (%s); kept for the next post", NAME,
                        len(batch) - sent, exc)
            return False
        self._fold(into)
        return True

    def _fold(self, into: PostReport) -> None:
        for r in into.rejected[:1]:
            self._warn_once(f"rejected:{r.reason}", f"{NAME}: the monitor rejected {r.source}: "
                            f"{r.reason}: {r.detail}")
        self._report = self._report.merge(into)

    async def _ask(self) -> None:
        """Ask the plan; a stop is kept (decisions stay taken), a failure only logged."""
        import anyio

        def call() -> dict[str, Any]:
            return self.client.plan(self._bench, self._name, against=self.against,
                                    top=self.top, budget=self.budget, count=0)
        try:
            plan = await anyio.to_thread.run_sync(call)
        except ClientError as exc:
            if exc.status != 404:  # 404: the benchmark has no result yet
                log.warning("%s: asking the plan failed (%s); evaluation goes on", NAME, exc)
            return
        self._plans += 1
        self._plan = plan
        if plan.get("action") == "stop" and self._stop is None:
            self._stop = plan
            # The samples running meanwhile still finish and are posted at the end.
            self._stopped_after = self._report.events
            log.info("%s: %s on %s: stop after %d results: %s", NAME, self._name, self._bench,
                     self._stopped_after, plan.get("reason"))

    def _summary(self) -> dict[str, Any]:
        final = self._plan or {}
        return {
            "monitor": self.client.url, "benchmark": self._bench, "model": self._name,
            "epochs": self._epochs, "completed": self._completed, "skipped": self._skipped,
            "stopped": self._stop is not None,
            "stop_reason": None if self._stop is None else self._stop.get("reason"),
            "stopped_after": self._stopped_after, "plans": self._plans,
            "posted": self._report.counts(), "retries": self._report.retries,
            "rejected_reasons": dict(self._report.reasons), "passed_over": dict(self._passed),
            "final_action": final.get("action"), "final_reason": final.get("reason"),
            "items_done": final.get("items_done"), "items_total": final.get("items_total"),
        }
