"""Running the perturbation-stability audit on an items file against one model adapter."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from pydantic import SecretStr, ValidationError

from monitor.audit import stability as st
from monitor.errors import ConfigError

ADAPTERS = ("openai", "local")


def make_adapter(
    items: Sequence[st.MCItem],
    *,
    adapter: str,
    model: str,
    base_url: str = "http://127.0.0.1:8000/v1",
    api_key: str | None = None,
    timeout: float = 30.0,
    retries: int = 3,
    backoff: float = 0.5,
    local_accuracy: float = 0.8,
    local_flip: float = 0.05,
    seed: int = 0,
) -> st.ModelAdapter:
    """The adapter named by ``adapter``: an OpenAI-compatible endpoint or the local simulator."""
    if adapter == "local":
        return st.LocalAdapter(items, accuracy=local_accuracy, flip=local_flip, seed=seed,
                               name=model)
    if adapter != "openai":
        raise ConfigError(f"--adapter must be 'openai' or 'local', got {adapter!r}")
    try:
        cfg = st.EndpointConfig(base_url=base_url, model=model,
                                api_key=SecretStr(api_key) if api_key else None,
                                timeout=timeout, retries=retries, backoff=backoff)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"--{first['loc'][0]}: {first['msg']}") from None
    return st.OpenAIChatAdapter(cfg)


def stability_file(
    items_path: str | Path,
    *,
    adapter: str,
    model: str,
    kinds: Sequence[str] = st.KINDS,
    seed: int = 0,
    concurrency: int = 8,
    base_url: str = "http://127.0.0.1:8000/v1",
    api_key: str | None = None,
    timeout: float = 30.0,
    retries: int = 3,
    backoff: float = 0.5,
    local_accuracy: float = 0.8,
    local_flip: float = 0.05,
) -> st.StabilityReport:
    """Load the multiple-choice items, ask the model every variant and compute flip rates."""
    items = st.load_items(items_path)
    ad = make_adapter(items, adapter=adapter, model=model, base_url=base_url, api_key=api_key,
                      timeout=timeout, retries=retries, backoff=backoff,
                      local_accuracy=local_accuracy, local_flip=local_flip, seed=seed)
    return asyncio.run(st.run_stability(items, ad, kinds=kinds, seed=seed,
                                        concurrency=concurrency))
