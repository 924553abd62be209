"""Configuration of the live monitor: one frozen settings object for every runner.

``llm-monitor run`` (embedded) and ``llm-monitor worker`` (both Kafka engines) build the same
:class:`Settings` once, in the CLI, and pass it down; the monitor core's options come from it
through :meth:`Settings.core_config` only, so every core option means the same in every runner.

A value comes from, highest first: a command-line option (``--eval-interval``), an environment
variable with the prefix ``LLM_MONITOR_`` (``LLM_MONITOR_EVAL_INTERVAL``), a settings file
given with ``--config FILE`` (TOML, JSON or YAML; top-level key ``eval_interval``), the default.
Nothing here is read at import time.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from monitor.core.config import BenchmarkSpec, CoreConfig
from monitor.errors import ConfigError
from monitor.stats.figures import Design
from monitor.stats.multiplicity import METHODS

ENV_PREFIX = "LLM_MONITOR_"

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9,
          "ki": 2**10, "mi": 2**20, "gi": 2**30}


def parse_size(text: str | int, *, name: str = "max_body_bytes") -> int:
    """Bytes from ``10MB``, ``512k``, ``1MiB`` or a plain integer (``name``: the setting, for
    the error message).

    Example
    -------
    >>> parse_size("10MB"), parse_size("1KiB"), parse_size(42)
    (10000000, 1024, 42)
    """
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE.match(str(text))
        if m is None:
            raise ValueError(f"`{name}` must look like 10MB, 512k or 1048576, got {text!r}")
        unit = (m.group(2) or "").lower().removesuffix("b")
        value = math.floor(float(m.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"`{name}` must be positive, got {text!r}")
    return value


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bootstrap_servers(broker: str) -> list[str]:
    """``kafka://h1:9092,h2:9092`` (or plain ``h:p``) → ``["h1:9092", "h2:9092"]``.

    Example
    -------
    >>> bootstrap_servers("kafka://a:9092,b:9093")
    ['a:9092', 'b:9093']
    """
    text = broker.strip()
    for scheme in ("kafka://", "tcp://"):
        if text.startswith(scheme):
            text = text[len(scheme):]
    hosts = [h.strip().rstrip("/") for h in text.split(",") if h.strip()]
    if not hosts or any(":" not in h for h in hosts):
        raise ValueError(f"`broker` must look like kafka://host:port, got {broker!r}")
    return hosts


def read_settings_file(path: Path) -> dict[str, Any]:
    """The top-level mapping of a TOML (``.toml``), JSON (``.json``) or YAML settings file."""
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json", ".yaml", ".yml"):
        raise ConfigError(f"--config {path}: use a .toml, .json, .yaml or .yml file")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--config {path}: cannot read ({exc.strerror})") from None
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            # A runtime dependency, but an install may lack it: the file is not at fault.
            raise ConfigError(f"--config {path}: reading YAML needs PyYAML: pip install "
                              "pyyaml, or use a .toml or .json file") from None
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text) or {}
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, ValueError) as exc:
        raise ConfigError(f"--config {path}: not valid {suffix[1:].upper()}: {exc}") from None
    except Exception as exc:  # yaml.YAMLError; yaml is imported only for YAML files
        raise ConfigError(f"--config {path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: the file must hold a mapping of settings")
    return data


# The settings file of the Settings being built (set by Settings.build only).
_FILE: ContextVar[tuple[Path, dict[str, Any]] | None] = ContextVar("llm_monitor_settings_file",
                                                                    default=None)


class _FileSource(PydanticBaseSettingsSource):
    """The values of the ``--config`` file, below the environment and the flags."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        current = _FILE.get()
        data = {} if current is None else current[1]
        return data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        current = _FILE.get()
        return {} if current is None else dict(current[1])


def _none(value: Any) -> Any:
    """``none``, ``off`` or an empty value (the environment, a file) as None."""
    if isinstance(value, str) and value.strip().lower() in ("", "none", "off", "null"):
        return None
    return value


# The core options' defaults have one home, the core's own config (a lower layer, which cannot
# read this module); the settings read them there and the CLI help reads the settings.
_CORE = CoreConfig()
_SPEC = BenchmarkSpec()


class BenchmarkSettings(BaseModel):
    """What the settings declare for one benchmark (``[benchmarks.<name>]`` in a settings
    file; ``LLM_MONITOR_BENCHMARKS='{"name": {...}}'`` in the environment)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # K samples per (item, model) of this benchmark (its results' `sample` 0 … K − 1).
    samples: int = Field(default=_SPEC.samples, ge=1, le=1024)
    # How its items were drawn (docs/clusters-vs-strata.md): "items", "strata" (the results'
    # `cluster` labels are fixed strata) or "clusters" (sampled clusters); it decides the
    # verdict. cluster_items: r, the items of a cluster forming its one observation.
    design: Design = _SPEC.design
    cluster_items: int = Field(default=_SPEC.cluster_items, ge=1, le=10_000)
    # Δ, the equivalence margin on the score scale (0.01 = one point); "none": no
    # equivalence decisions.
    margin: float | None = Field(default=_SPEC.margin, gt=0.0, lt=0.5)

    @field_validator("margin", mode="before")
    @classmethod
    def _no_margin(cls, value: Any) -> Any:
        return _none(value)

    def spec(self) -> BenchmarkSpec:
        return BenchmarkSpec(samples=self.samples, design=self.design,
                             cluster_items=self.cluster_items, margin=self.margin)


class Settings(BaseSettings):
    """Everything ``llm-monitor run`` and ``llm-monitor worker`` need; frozen once built.

    Core options (``alpha`` … ``include_leak_suspect``, ``eval_interval``) apply to every
    runner; ``db`` … ``snapshot_interval`` to the embedded runner; ``broker`` … ``engine`` to
    the workers. The bearer token is a :class:`~pydantic.SecretStr`: never in reprs or logs.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="forbid", case_sensitive=False
    )

    # -- the monitor core (every runner) ---------------------------------------------------
    alpha: float = Field(default=_CORE.alpha, gt=0.0, lt=1.0)
    power: float = Field(default=_CORE.power, gt=0.0, lt=1.0)
    # The board size each pair's fixed share of α is planned for (monitor.stats.sequential).
    planned_models: int = Field(default=_CORE.planned_models, ge=2)
    # K samples per (item, model) of a new benchmark that declares none, in `benchmarks` or
    # by its first result's `k`: an item enters the pairs with the mean of its K samples.
    samples: int = Field(default=_CORE.samples, ge=1, le=1024)
    # The design (and items per cluster observation) of a benchmark not in `benchmarks`.
    design: Design = _CORE.design
    cluster_items: int = Field(default=_CORE.cluster_items, ge=1, le=10_000)
    # Δ, the equivalence margin of a benchmark not in `benchmarks`: a pair whose confidence
    # sequence lies inside (−Δ, Δ) is declared equivalent (0.01 = one point; "none": never).
    margin: float | None = Field(default=_CORE.margin, gt=0.0, lt=0.5)
    # Per-benchmark declarations, fixed when the benchmark's first result arrives.
    benchmarks: dict[str, BenchmarkSettings] = Field(default_factory=dict)
    family: Literal["adjacent", "all"] = _CORE.family
    # Multiplicity correction of the fixed-N figures (monitor.stats.multiplicity.METHODS).
    correction: str = _CORE.correction
    per_pair_series: Literal["adjacent", "all"] = _CORE.per_pair_series
    # At most this many pairs per benchmark get per-pair metrics series (top of the ranking).
    pair_series_limit: int = Field(default=_CORE.pair_series_limit, ge=0)
    # Items carrying any of these flags are excluded from resolution; a comma-separated list
    # in the environment (LLM_MONITOR_EXCLUDE_FLAGS=leak-suspect,canary).
    exclude_flags: Annotated[tuple[str, ...], NoDecode] = _CORE.exclude_flags
    # Items flagged `leak-suspect` count in resolution (drops it from exclude_flags).
    include_leak_suspect: bool = False
    # Verdicts are re-evaluated at most this often (seconds) while results stream in, and once
    # the stream pauses; 0 evaluates after every batch. Each evaluation is a stopping time.
    eval_interval: float = Field(default=0.25, ge=0.0, le=60.0)

    # -- embedded runner (llm-monitor run) -------------------------------------------------
    db: Path = Path("llm-monitor.db")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    token: SecretStr | None = None
    max_body_bytes: int = 10_000_000
    view: bool = True
    # FULL fsyncs the WAL on every commit, so an acknowledged result survives a power cut too;
    # NORMAL survives a process crash (SIGKILL) but not the loss of the machine.
    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"
    # A snapshot of the monitors is stored after this many accepted results (0: not by count)
    # and after this many seconds with any result since the last one (0: not by time), so a
    # restart loads it and replays only the results after it. Each snapshot pauses ingest
    # while it is taken; see docs/operations.md for the trade.
    snapshot_every: int = Field(default=100_000, ge=0)
    snapshot_interval: float = Field(default=300.0, ge=0.0)
    # Dead letters stored (and listed in the reply) per request, and stored per window of
    # dead_letter_window seconds; the rest are counted and summarised, never stored one by one,
    # so a body of a million bad lines costs O(1) rows (docs/operations.md "Caps").
    dead_letters_per_request: int = Field(default=20, ge=1)
    dead_letters_per_window: int = Field(default=1000, ge=1)
    dead_letter_window: float = Field(default=60.0, gt=0.0)
    # What one client can make the process hold: a request that would go past a cap is refused
    # whole (429, or 413 for max_batch_events) and nothing of it is applied; the memory each
    # costs is in docs/operations.md "Caps".
    max_benchmarks: int = Field(default=1000, ge=1)
    max_models_per_benchmark: int = Field(default=1000, ge=2)
    max_clusters_per_benchmark: int = Field(default=1000, ge=1)
    max_perturbation_kinds: int = Field(default=64, ge=1)
    max_batch_events: int = Field(default=200_000, ge=1)
    # A budget for the whole process, over all benchmarks together (each cap above is per
    # benchmark, and a thousand benchmarks of a thousand models would need 100 GB): at most
    # max_total_models models, max_total_items items, max_total_cells stored scores and
    # max_state_bytes bytes of state (the arrays at their capacity and the names, as
    # monitor.core.board counts them). A request that would pass one is refused whole (429
    # naming it); what is held is kept, even over a budget lowered since. The defaults fit a
    # machine of 8 GB: the process stays under max_state_bytes + 0.5 GB (docs/operations.md
    # "Caps", measured: 2.1 GB at most under the report's pattern).
    max_total_models: int = Field(default=50_000, ge=2)
    max_total_items: int = Field(default=5_000_000, ge=1)
    max_total_cells: int = Field(default=100_000_000, ge=1)
    max_state_bytes: int = 2_000_000_000
    # Connections: closed after idle_timeout seconds without a request (before the first one
    # too, or in the middle of its headers) or without a byte of a body being received; a body
    # must arrive within body_timeout; at most max_connections at once (fewer under a low
    # `ulimit -n`), idle ones closed first; at most max_concurrent_bodies bodies held (being
    # received or waiting to be applied). While every body slot is taken, the body arriving
    # slowest below min_body_rate (bytes/s on average, after its first half second) is cut off
    # with 408 and its slot goes to the request waiting for one (docs/operations.md "Caps").
    idle_timeout: float = Field(default=10.0, gt=0.0)
    body_timeout: float = Field(default=60.0, gt=0.0)
    max_connections: int = Field(default=1000, ge=1)
    max_concurrent_bodies: int = Field(default=8, ge=1)
    min_body_rate: int = 65_536
    # Without a token, requests must name this server in their Host header: the bound address,
    # a loopback name, or one of these (comma-separated in the environment).
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = ()

    # -- distributed worker (llm-monitor worker) -------------------------------------------
    broker: str = "kafka://127.0.0.1:9092"
    partitions: int = Field(default=3, ge=1)  # of the results topic, when the worker creates it
    group: str = Field(default="llm-monitor", min_length=1)
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=9308, ge=0, le=65535)
    # Seconds between state checkpoints (and offset commits) of the kafka-python engine; the
    # longest wait for a batch of the Faust engine.
    checkpoint_interval: float = Field(default=2.0, gt=0.0)
    batch_size: int = Field(default=20_000, ge=1)  # records per poll of a worker
    engine: Literal["kafka", "faust"] = "kafka"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _FileSource(settings_cls)

    @field_validator("max_body_bytes", "min_body_rate", "max_state_bytes", mode="before")
    @classmethod
    def _size(cls, value: Any, info: ValidationInfo) -> int:
        return parse_size(value, name=str(info.field_name))

    @field_validator("token", mode="after")
    @classmethod
    def _token(cls, value: SecretStr | None) -> SecretStr | None:
        # Surrounding whitespace is trimmed, from the environment and the file alike.
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("the token must not be empty")
        return None if value is None else SecretStr(value.get_secret_value().strip())

    @field_validator("correction", mode="after")
    @classmethod
    def _correction(cls, value: str) -> str:
        if value not in METHODS:
            raise ValueError(f"must be one of {', '.join(METHODS)}")
        return value

    @field_validator("margin", mode="before")
    @classmethod
    def _no_margin(cls, value: Any) -> Any:
        return _none(value)

    @field_validator("exclude_flags", "allowed_hosts", mode="before")
    @classmethod
    def _flags(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(f.strip() for f in value.split(",") if f.strip())
        return value

    @field_validator("broker", mode="after")
    @classmethod
    def _broker(cls, value: str) -> str:
        bootstrap_servers(value)
        return value

    @classmethod
    def build(cls, *, config: Path | None = None, token_file: Path | None = None,
              serve_http: bool = True, **options: Any) -> Settings:
        """Settings from CLI options (``None`` means: not given, use env, file or default).

        ``config`` is the settings file; ``token_file`` holds the bearer token on its first
        line. ``serve_http``: this process serves HTTP ingest on ``host`` (``llm-monitor
        run``), so a non-loopback ``host`` needs a token. Raises :class:`ConfigError` naming
        the option, the environment variable and the file key of an invalid value.
        """
        given = {k: v for k, v in options.items() if v is not None}
        if token_file is not None:
            try:
                text = Path(token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(f"--token-file {token_file}: cannot read ({exc.strerror})") from exc
            if not text:
                raise ConfigError(f"--token-file {token_file}: the file is empty")
            given["token"] = text.splitlines()[0].strip()
        file = None if config is None else (Path(config), read_settings_file(Path(config)))
        with _settings_file(file):
            try:
                settings = cls(**given)
            except ValidationError as exc:
                raise ConfigError(_describe(exc, file[0] if file else None)) from None
        if serve_http:
            settings.check_bind()
        return settings

    # -- derived ---------------------------------------------------------------------------
    @property
    def effective_exclude_flags(self) -> tuple[str, ...]:
        """Flags whose items the core excludes from resolution."""
        if self.include_leak_suspect:
            return tuple(f for f in self.exclude_flags if f != "leak-suspect")
        return self.exclude_flags

    def core_config(self) -> CoreConfig:
        """The monitor core's options: the one place a runner gets its :class:`CoreConfig`."""
        return CoreConfig(alpha=self.alpha, power=self.power,
                          planned_models=self.planned_models, family=self.family,
                          correction=self.correction, per_pair_series=self.per_pair_series,
                          pair_series_limit=self.pair_series_limit,
                          exclude_flags=self.effective_exclude_flags, samples=self.samples,
                          design=self.design, cluster_items=self.cluster_items,
                          margin=self.margin,
                          benchmarks={name: b.spec() for name, b in self.benchmarks.items()})

    @property
    def bootstrap(self) -> list[str]:
        """The broker's ``host:port`` list."""
        return bootstrap_servers(self.broker)

    def check_bind(self) -> None:
        """Refuse to serve a non-loopback address without a bearer token."""
        if not is_loopback(self.host) and self.token is None:
            raise ConfigError(
                f"refusing to listen on {self.host!r} without a token: anyone on the network "
                f"could write results. Pass --token-file FILE (or set {ENV_PREFIX}TOKEN, or "
                "token in the --config file), or bind to 127.0.0.1"
            )


@contextmanager
def _settings_file(file: tuple[Path, dict[str, Any]] | None) -> Iterator[None]:
    token = _FILE.set(file)
    try:
        yield
    finally:
        _FILE.reset(token)


def _describe(exc: ValidationError, path: Path | None) -> str:
    """One line per invalid setting, naming where it can be set."""
    lines = []
    for err in exc.errors(include_url=False):
        name = str(err["loc"][0]) if err["loc"] else "settings"
        if err["type"] == "extra_forbidden":
            where = f" in {path}" if path is not None else ""
            lines.append(f"unknown setting {name!r}{where}")
            continue
        msg = str(err["msg"]).removeprefix("Value error, ")
        file_key = f", key {name} in {path}" if path is not None else f", or file key {name}"
        lines.append(f"invalid setting {name!r} (option --{name.replace('_', '-')}, "
                     f"env {ENV_PREFIX}{name.upper()}{file_key}): {msg}")
    return "; ".join(lines)
