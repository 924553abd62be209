"""The exception root of llm-monitor; each docstring tells the operator what to do."""

from __future__ import annotations


class MonitorError(Exception):
    """Something the user can fix went wrong; read the message, fix the input or option, rerun."""


class InputError(MonitorError, ValueError):
    """Bad input data: fix the file, line and field the message names."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.reason = message
        self.source = source
        self.line = line
        self.field = field
        where = []
        if source is not None:
            where.append(str(source))
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{': '.join([', '.join(where), message]) if where else message}")


class ConfigError(MonitorError):
    """An option or setting is invalid or unsafe: change the flag or environment variable named."""
