"""Files of results in the monitor's contract (``stability --events-out``, a curl body): told
apart from long tables, read line by line with every field kept, a bad line named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.commands.post import file_events
from monitor.errors import ConfigError, InputError
from monitor.io.events import is_events_file, read_events


def _write(path: Path, *rows: dict | str) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


EV = {"benchmark": "mc", "item_id": "q1", "model": "m", "score": 1.0, "variant": "original"}


def test_a_contract_file_is_told_from_a_long_table(tmp_path: Path) -> None:
    assert is_events_file(_write(tmp_path / "ev.jsonl", "", EV))
    # A column the contract lacks makes it a table (its --cluster-col may name that column).
    assert not is_events_file(_write(tmp_path / "long.jsonl", {**EV, "subject": "x"}))
    assert not is_events_file(_write(tmp_path / "part.jsonl", {"item_id": "q1", "score": 1}))
    assert not is_events_file(_write(tmp_path / "ev.csv", EV))


def test_every_field_is_kept_and_a_bad_line_is_named(tmp_path: Path) -> None:
    flagged = {**EV, "item_id": "q2", "variant": "perturbed:shuffle", "flags": ["leak-suspect"],
               "run_id": "r1", "sample": 0}
    path = _write(tmp_path / "ev.jsonl", EV, "", flagged, "[1, 2]")
    passed: dict[str, int] = {}
    events = read_events(path, benchmark="other", passed_over=passed)
    assert next(events) == ({**EV, "benchmark": "other"}, f"{path}:1")
    assert next(events) == ({**flagged, "benchmark": "other"}, f"{path}:3")
    with pytest.raises(InputError, match="expected a JSON object") as err:
        next(events)
    assert (err.value.source, err.value.line) == (str(path), 4)
    assert passed == {"blank line": 1}


def test_table_options_are_refused_for_a_contract_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "ev.jsonl", EV)

    def read(**options: object) -> list[object]:
        base: dict[str, object] = {"benchmark": None, "model": None, "metric": None,
                                   "filter": None, "scorer": None, "exclude": (),
                                   "cluster_col": None}
        return list(file_events(path, **{**base, **options}))  # type: ignore[arg-type]

    assert len(read(cluster_col="cluster")) == 1
    with pytest.raises(ConfigError, match="their cluster is the field 'cluster', not 'subject'"):
        read(cluster_col="subject")
    with pytest.raises(ConfigError, match="--exclude has no column to leave out"):
        read(exclude=("x",))
