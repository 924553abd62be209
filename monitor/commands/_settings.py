"""Commands whose options set fields of the live monitor's Settings (``run``, ``worker``, …).

Such an option defaults to ``None`` (not given: the environment, the ``--config`` file or the
field's default decides), so typer has no default to show; its ``--help`` states the field's
default read from :class:`~monitor.runners.settings.Settings` when the help is drawn. Settings
imports pydantic, which ``llm-monitor --help`` and the quick commands must not pay for.
"""

from __future__ import annotations

from typing import Any

import typer.core

#: Options that set a Settings field of another name; any other option sets the field it is
#: named after, if there is one.
FIELD_OF_OPTION = {"exclude_flag": "exclude_flags"}


def settings_field(option: str) -> str:
    """The Settings field an option (its parameter name) sets, if it names one."""
    return FIELD_OF_OPTION.get(option, option)


def default_text(option: typer.core.TyperOption, value: Any) -> str:
    """``value`` as a user would write it on this option's command line."""
    if isinstance(value, bool) and option.secondary_opts:
        return option.opts[0] if value else option.secondary_opts[0]
    if isinstance(value, tuple | list):
        return ", ".join(map(str, value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class SettingsCommand(typer.core.TyperCommand):
    """A command whose ``--help`` adds "(default: …)" from Settings to its Settings options."""

    _defaults_shown = False

    def _show_defaults(self) -> None:
        if self._defaults_shown:
            return
        from monitor.runners.settings import Settings

        for param in self.params:
            field = Settings.model_fields.get(settings_field(param.name or ""))
            if (field is None or not isinstance(param, typer.core.TyperOption)
                    or param.default is not None):
                continue
            value = field.get_default(call_default_factory=True)
            if value is None or value == {}:
                continue  # nothing to state: no token, no per-benchmark declarations
            text = default_text(param, value)
            param.help = f"{param.help} (default: {text})" if param.help else f"default: {text}"
        self._defaults_shown = True

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._show_defaults()
        super().format_help(ctx, formatter)
