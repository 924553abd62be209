"""Configuration of the live monitor: one frozen settings object, built once by the CLI.

Every field can also come from the environment with the prefix ``LLM_MONITOR_`` (for example
``LLM_MONITOR_TOKEN`` or ``LLM_MONITOR_PORT``); command-line options win over the environment.
Nothing here is read at import time: :meth:`Settings.build` is called by the CLI and the object
is passed down.
"""

from __future__ import annotations

import ipaddress
import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from monitor.errors import ConfigError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9,
          "ki": 2**10, "mi": 2**20, "gi": 2**30}


def parse_size(text: str | int) -> int:
    """Bytes from ``10MB``, ``512k``, ``1MiB`` or a plain integer.

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
            raise ValueError(f"`max_body_bytes` must look like 10MB, 512k or 1048576, got {text!r}")
        unit = (m.group(2) or "").lower().removesuffix("b")
        value = math.floor(float(m.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"`max_body_bytes` must be positive, got {text!r}")
    return value


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Settings(BaseSettings):
    """Everything ``llm-monitor run`` needs; frozen once built.

    The bearer token is a :class:`~pydantic.SecretStr` so it never appears in reprs or logs.
    """

    model_config = SettingsConfigDict(
        env_prefix="LLM_MONITOR_", frozen=True, extra="forbid", case_sensitive=False
    )

    db: Path = Path("llm-monitor.db")
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    token: SecretStr | None = None
    max_body_bytes: int = 10_000_000
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    power: float = Field(default=0.8, gt=0.0, lt=1.0)
    family: Literal["adjacent", "all"] = "adjacent"
    view: bool = True
    # Items flagged `leak-suspect` are excluded from resolution unless this is set.
    include_leak_suspect: bool = False
    # Verdicts are re-evaluated at most this often (seconds) while results stream in, and once
    # the stream pauses; 0 evaluates after every request. Each evaluation is a stopping time.
    eval_interval: float = Field(default=0.25, ge=0.0, le=60.0)
    # FULL fsyncs the WAL on every commit, so an acknowledged result survives a power cut too;
    # NORMAL survives a process crash (SIGKILL) but not the loss of the machine.
    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"

    @field_validator("max_body_bytes", mode="before")
    @classmethod
    def _size(cls, value: Any) -> int:
        return parse_size(value)

    @field_validator("token", mode="after")
    @classmethod
    def _token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("the token must not be empty")
        return value

    @classmethod
    def build(cls, *, token_file: Path | None = None, **options: Any) -> Settings:
        """Settings from CLI options (``None`` means: not given, use the environment or default).

        ``token_file`` holds the bearer token on its first line. Raises :class:`ConfigError`
        naming the option when a value is invalid, and when a non-loopback ``host`` would be
        served without a token.
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
        try:
            settings = cls(**given)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "settings"
            raise ConfigError(f"invalid setting {field!r} (option --{field.replace('_', '-')} "
                              f"or LLM_MONITOR_{field.upper()}): {err['msg']}") from None
        settings.check_bind()
        return settings

    @property
    def exclude_flags(self) -> tuple[str, ...]:
        """Flags whose items the core excludes from resolution."""
        return () if self.include_leak_suspect else ("leak-suspect",)

    def check_bind(self) -> None:
        """Refuse to serve a non-loopback address without a bearer token."""
        if not is_loopback(self.host) and self.token is None:
            raise ConfigError(
                f"refusing to listen on {self.host!r} without a token: anyone on the network "
                "could write results. Pass --token-file FILE (or set LLM_MONITOR_TOKEN), "
                "or bind to 127.0.0.1"
            )
