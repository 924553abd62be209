"""The combined audit verdict from compare, leakage and stability, each either a saved
``--json`` report or a result computed in this process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from monitor.audit.leakage import LeakageReport
from monitor.audit.stability import StabilityReport
from monitor.audit.verdict import Verdict, decide, missing_keys
from monitor.contracts import jsonable
from monitor.errors import InputError
from monitor.offline.compare import CompareResult

Report = dict[str, Any]


def load_report(path: str | Path, what: str) -> Report:
    """The saved output of ``llm-monitor <what> --json``; InputError when it is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no such file", source=str(path)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not the JSON output of `llm-monitor {what} --json` ({exc})",
                         source=str(path)) from None
    if not isinstance(data, dict):
        raise InputError(f"not the JSON output of `llm-monitor {what} --json`", source=str(path))
    missing = missing_keys(data, what)
    if missing:
        raise InputError(f"not the JSON output of `llm-monitor {what} --json`: no "
                         f"{', '.join(missing)}", source=str(path))
    return data


def leak_suspects(leakage: LeakageReport | Report) -> frozenset[str]:
    """Ids of the eval items whose status is leak."""
    if isinstance(leakage, LeakageReport):
        return frozenset(m.item_id for m in leakage.matches if m.status == "leak")
    return frozenset(leakage.get("leak_suspects") or ())


def wire_form(report: CompareResult | LeakageReport | StabilityReport | Report) -> Report:
    """A result as its command's ``--json`` output would carry it, so a saved report and
    one computed here lead to the same verdict."""
    if isinstance(report, LeakageReport):
        return dict(jsonable(report.to_dict(items=False)))
    if isinstance(report, (CompareResult, StabilityReport)):
        return dict(jsonable(report.to_dict()))
    return dict(jsonable(report))


def judge(
    compare: CompareResult | Report | None,
    leakage: LeakageReport | Report | None,
    stability: StabilityReport | Report | None,
    *,
    max_leak_share: float = 0.05,
    max_flip_rate: float = 0.10,
) -> Verdict:
    """A scenario with its evidence from any of the three checks (None: not given); see
    :func:`monitor.audit.verdict.decide`."""
    return decide(*(None if r is None else wire_form(r) for r in (compare, leakage, stability)),
                  max_leak_share=max_leak_share, max_flip_rate=max_flip_rate)
