"""The stability driver: the local adapter end to end and adapter construction."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from monitor.audit import stability as st
from monitor.errors import ConfigError
from monitor.offline.stability import make_adapter, stability_file


def _items(tmp_path: Path, n: int = 60) -> Path:
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"{i} + 1?",
                                        "options": [str(i + 1), str(i), str(i + 2)],
                                        "answer": 0}) + "\n" for i in range(n)))
    return path


def test_local_run_is_the_audit_run_on_the_loaded_items(tmp_path: Path) -> None:
    path = _items(tmp_path)
    rep = stability_file(path, adapter="local", model="M", kinds=("shuffle", "noise"), seed=4,
                         local_accuracy=0.9, local_flip=0.3)
    items = st.load_items(path)
    ref = asyncio.run(st.run_stability(
        items, st.LocalAdapter(items, accuracy=0.9, flip=0.3, seed=4, name="M"),
        kinds=("shuffle", "noise"), seed=4))
    assert rep.to_dict(outcomes=True) == ref.to_dict(outcomes=True)
    assert rep.model == "M" and rep.kinds == ("shuffle", "noise") and rep.n_items == 60
    # A flip probability of 0.3 per perturbation must show: far above the 10 % alarm level.
    assert rep.overall.rate > 0.15 and rep.alarm


def test_openai_adapter_carries_the_key_and_settings() -> None:
    ad = make_adapter([], adapter="openai", model="m", base_url="http://127.0.0.1:9/v1",
                      api_key="sk-test", timeout=5.0, retries=1)
    assert isinstance(ad, st.OpenAIChatAdapter)
    cfg = ad.config
    assert cfg.api_key is not None and cfg.api_key.get_secret_value() == "sk-test"
    assert (cfg.timeout, cfg.retries, cfg.model) == (5.0, 1, "m")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"adapter": "hf"}, "--adapter must be 'openai' or 'local'"),
    ({"adapter": "openai", "timeout": 0.0}, "--timeout"),
])
def test_bad_adapter_settings_are_config_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_adapter([], model="m", **kwargs)  # type: ignore[arg-type]
