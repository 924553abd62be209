"""lm-evaluation-harness that evaluates until resolved: rounds of the harness on the documents
the monitor's plan hands out, each round's samples posted, until the plan says stop
(``llm-monitor evaluate-until-resolved``; docs/until-resolved.md, "lm-evaluation-harness").

One round:

1. ask the plan of the model (``GET /v1/benchmarks/{benchmark}/models/{model}/plan``); stop
   when it says stop;
2. write its next items as the harness's ``--samples`` mapping, ``{"<task>": [doc ids]}``
   (lm_eval ≥ 0.4.9 reads it from a file): the items of an lm-eval task on the board are its
   doc ids (``llm-monitor post`` of a samples file: item = ``doc_id``);
3. run the harness command with ``--samples FILE --log_samples --output_path DIR`` (a new
   directory per round);
4. post the round's ``samples_<task>_*.jsonl`` and check that the documents evaluated are the
   ones asked for.

The doc ids of a round are written in ascending order: the harness (up to at least 0.4.13)
runs the selected documents in dataset order and labels the i-th one with the i-th id of the
list as given, so an unsorted list would log documents under each other's ids
(EleutherAI/lm-evaluation-harness#4084). The order in which a round's results arrive is then
doc-id order within a set chosen by the monitor's fixed random order: independent of the
outcomes, as the anytime decisions require.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor.client import MonitorClient, PostReport
from monitor.errors import ConfigError, InputError, MonitorError

#: Options the loop sets on the harness command itself (each round's documents and output).
OWN_OPTIONS = ("--samples", "-E", "--limit", "-L", "--output_path", "-o")
#: Next items asked per round by default.
ROUND = 200


def samples_mapping(next_items: Sequence[str], task: str) -> dict[str, list[int]]:
    """The harness's ``--samples`` mapping of the plan's next items: ``{task: doc ids}``,
    ascending (see the module docstring for why).

    Example
    -------
    >>> samples_mapping(["17", "3", "250"], "arc_easy")
    {'arc_easy': [3, 17, 250]}
    """
    if not next_items:
        raise MonitorError("the plan hands out no items: the board has no item this model has "
                           "not done that another model has (a model alone on its board is "
                           "evaluated in full: run the harness without --samples)")
    docs: list[int] = []
    for item in next_items:
        if not item.isdigit():
            raise InputError(f"item {item!r} of the board is not a document index of an "
                             "lm-eval task (the items of a task are its doc ids, as `llm-monitor "
                             "post` of its samples files gives them; a group of subtasks needs "
                             "one loop per subtask)", field="item_id")
        docs.append(int(item))
    return {task: sorted(docs)}


def harness_command(command: Sequence[str], *, samples: Path, output: Path) -> list[str]:
    """The harness command of one round: ``command`` with this round's documents and output."""
    if not command:
        raise ConfigError("no harness command given (after `--`: lm-eval run --model … --tasks …)")
    own = [a for a in command if a.split("=", 1)[0] in OWN_OPTIONS]
    if own:
        raise ConfigError(f"the harness command sets {own[0].split('=', 1)[0]}, which each "
                          "round sets itself (the documents to run and where the samples go): "
                          "leave it out")
    return [*command, "--samples", str(samples), "--log_samples", "--output_path", str(output)]


@dataclass
class Round:
    """One round: the documents asked for and what the monitor did with their results."""

    number: int
    asked: int
    evaluated: int
    report: PostReport
    plan_reason: str


@dataclass
class UntilResolved:
    """The loop's account: the rounds, and the plan that ended it."""

    rounds: list[Round] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)
    #: The samples of an earlier run's rounds, posted again at the start.
    resumed: PostReport = field(default_factory=PostReport)

    @property
    def evaluated(self) -> int:
        return sum(r.evaluated for r in self.rounds)

    def as_dict(self) -> dict[str, Any]:
        f = self.final
        return {
            "action": f.get("action"), "reason": f.get("reason"),
            "items_done": f.get("items_done"), "items_total": f.get("items_total"),
            "evaluated": self.evaluated,
            "rounds": [{"round": r.number, "asked": r.asked, "evaluated": r.evaluated,
                        **r.report.counts(), "plan": r.plan_reason} for r in self.rounds],
            "resumed": self.resumed.counts(),
            "settled": f.get("settled", []), "open": f.get("open", []),
        }


def _run(cmd: list[str]) -> int:
    # The harness's output goes to stderr: stdout is the caller's (``--json``).
    try:
        err: int | None = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a notebook's stderr has no descriptor
        err = None
    return subprocess.run(cmd, check=False, stdout=err).returncode


def _post_samples(client: MonitorClient, path: Path, *, benchmark: str, model: str,
                  metric: str | None, filter: str | None) -> tuple[list[int], PostReport]:
    """Post one samples file (item = doc_id); (the doc ids in it, ascending; the account)."""
    from monitor.io.lmeval import read_lmeval_samples

    got = read_lmeval_samples(path, model=model, metric=metric, filter=filter)
    events = [{"benchmark": benchmark, "item_id": i, "model": model, "score": s}
              for i, s in zip(got.item_ids.tolist(), got.scores.tolist(), strict=True)]
    report = client.post(events, sources=[f"{path}: doc {e['item_id']}" for e in events])
    return sorted(int(i) for i in got.item_ids.tolist()), report


def _samples_file(output: Path, task: str) -> Path:
    found = sorted(output.rglob(f"samples_{task}_*.jsonl")) + sorted(
        output.rglob(f"samples_{task}.jsonl"))
    if len(found) != 1:
        what = "no" if not found else f"{len(found)}"
        raise MonitorError(f"the harness wrote {what} samples_{task}_*.jsonl under {output} "
                           "(one expected: is the task name right, and did the run succeed?)")
    return found[0]


def run_until_resolved(
    client: MonitorClient,
    *,
    benchmark: str,
    model: str,
    command: Sequence[str],
    work_dir: Path,
    task: str | None = None,
    count: int = ROUND,
    against: Sequence[str] | None = None,
    top: int | None = None,
    budget: int | None = None,
    metric: str | None = None,
    filter: str | None = None,
    run: Callable[[list[str]], int] | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> UntilResolved:
    """Rounds of the harness until the plan of ``model`` on ``benchmark`` says stop.

    ``task`` is the lm-eval task (default: the benchmark's name); ``command`` the harness
    command line without the options each round sets (:data:`OWN_OPTIONS`); ``work_dir``
    receives ``round-NNN/samples.json`` and ``round-NNN/output/`` (the rounds of an earlier
    run there are posted again first, and the numbering goes on after them). ``run`` runs a
    command and returns its exit status (default: a subprocess writing its output to this
    process's stderr); ``say`` receives a line per round. Raises :class:`MonitorError` when the harness fails,
    writes no samples, evaluates other documents than asked, or a round adds nothing.
    """
    if count < 1:
        raise ValueError(f"`count` must be at least 1, got {count}")
    task = task or benchmark
    harness_command(command, samples=Path("-"), output=Path("-"))  # refuse bad commands first
    runner = run or _run
    out = UntilResolved()
    number = 0
    # The rounds of an earlier run in the same work directory (ended by an error or an
    # interrupt): their samples are posted again (what the monitor holds counts as duplicate,
    # what it lacks is taken), and the rounds go on after the last one.
    for here in sorted(work_dir.glob("round-[0-9][0-9][0-9]")):
        number = max(number, int(here.name.removeprefix("round-")))
        for path in sorted((here / "output").rglob(f"samples_{task}_*.jsonl")):
            _, report = _post_samples(client, path, benchmark=benchmark, model=model,
                                      metric=metric, filter=filter)
            out.resumed = out.resumed.merge(report)
            say(f"{here.name} of an earlier run: {report.events} results posted again: "
                f"accepted {report.accepted}, duplicate {report.duplicate}")
    while True:
        plan = client.plan(benchmark, model, against=against, top=top, budget=budget,
                           count=count)
        out.final = plan
        if plan["action"] == "stop":
            say(f"stop: {plan['reason']} ({plan['items_done']} of {plan['items_total']} items "
                f"done, {out.evaluated} in {len(out.rounds)} round(s) here)")
            return out
        if out.rounds and out.rounds[-1].report.accepted == 0:
            raise MonitorError(f"round {number} added no result to the board and the plan "
                               f"still says continue ({plan['reason']}): stopping here rather "
                               "than asking the harness for the same documents again")
        number += 1
        mapping = samples_mapping(plan["next_items"], task)
        asked = mapping[task]
        here = work_dir / f"round-{number:03d}"
        here.mkdir(parents=True, exist_ok=False)
        samples = here / "samples.json"
        samples.write_text(json.dumps(mapping), encoding="utf-8")
        cmd = harness_command(command, samples=samples, output=here / "output")
        say(f"round {number}: {len(asked)} documents ({plan['reason']})")
        status = runner(cmd)
        if status != 0:
            raise MonitorError(f"round {number}: the harness exited with status {status} "
                               f"({' '.join(cmd)})")
        path = _samples_file(here / "output", task)
        evaluated, report = _post_samples(client, path, benchmark=benchmark, model=model,
                                          metric=metric, filter=filter)
        out.rounds.append(Round(number=number, asked=len(asked), evaluated=len(evaluated),
                                report=report, plan_reason=plan["reason"]))
        say(f"round {number}: {len(evaluated)} results posted: accepted {report.accepted}, "
            f"duplicate {report.duplicate}, conflict {report.conflict}, invalid {report.invalid}")
        for r in report.rejected[:3]:
            say(f"round {number}: rejected {r.source}: {r.reason}: {r.detail}")
        if evaluated != asked:
            extra = sorted(set(evaluated) - set(asked))[:5]
            missing = sorted(set(asked) - set(evaluated))[:5]
            raise MonitorError(f"round {number}: the harness evaluated other documents than "
                               f"asked ({len(asked)} asked, {len(evaluated)} evaluated; not "
                               f"asked: {extra}, not evaluated: {missing}); does it take "
                               "--samples (lm_eval ≥ 0.4.9)?")
