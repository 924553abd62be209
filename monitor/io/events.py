"""Reader of result files in the monitor's own contract: JSON lines of ``ItemResult`` objects.

Such a file — ``llm-monitor stability --events-out``, a producer's own log, the body curl
posts — is sent as it is, one result per line with every field kept (``variant``, ``flags``,
``run_id``, ``sample``, ``cluster``, ``ts``). Read as a long table it would lose them: an
item's perturbed variants would be "two different scores" of one (item, model).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

from monitor.contracts import ItemResult
from monitor.errors import InputError
from monitor.io.lmeval import BLANK

#: Every field of the contract: a line with another key is a table row, not a result.
FIELDS = frozenset(ItemResult.model_fields)
REQUIRED = frozenset(name for name, f in ItemResult.model_fields.items() if f.is_required())
_SUFFIXES = (".jsonl", ".ndjson")


def _first_object(path: Path) -> Any:
    try:
        with path.open("rb") as fh:
            for raw in fh:
                if raw.strip():
                    return json.loads(raw)
    except (OSError, ValueError):
        return None
    return None


def is_events_file(path: Path) -> bool:
    """True for a ``.jsonl``/``.ndjson`` file whose first line is a result of the contract:
    an object with benchmark, item_id, model and score, and no key the contract lacks."""
    if not path.is_file() or not path.name.endswith(_SUFFIXES):
        return False
    rec = _first_object(path)
    return isinstance(rec, dict) and REQUIRED <= rec.keys() <= FIELDS


def read_events(path: Path, *, benchmark: str | None = None,
                passed_over: MutableMapping[str, int] | None = None
                ) -> Iterator[tuple[dict[str, Any], str]]:
    """(result, ``file:line``) of every line, in file order; ``benchmark`` replaces each
    line's. The monitor judges each result (its answer names the line); a line that is not
    a JSON object cannot be sent and is an error naming the file and line. Blank lines are
    counted in ``passed_over``."""
    source = str(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", source=source) from None
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                if passed_over is not None:
                    passed_over[BLANK] = passed_over.get(BLANK, 0) + 1
                continue
            try:
                rec = json.loads(raw)
            except UnicodeDecodeError:
                raise InputError("not UTF-8", source=source, line=lineno) from None
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON ({exc.msg})", source=source,
                                 line=lineno) from None
            if not isinstance(rec, dict):
                raise InputError("expected a JSON object (one result per line)", source=source,
                                 line=lineno)
            if benchmark is not None:
                rec["benchmark"] = benchmark
            yield rec, f"{source}:{lineno}"
