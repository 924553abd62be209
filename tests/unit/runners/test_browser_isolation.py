"""The pieces of browser isolation that need no server: the token trimmed from every source,
allowed_hosts from the environment, and how a Host header or an Origin is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.runners.embedded.guards import host_name, origin_of
from monitor.runners.settings import Settings


def test_the_token_is_trimmed_from_env_file_and_option(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_MONITOR_TOKEN", "  padded \t")
    assert Settings.build().token.get_secret_value() == "padded"  # type: ignore[union-attr]
    monkeypatch.delenv("LLM_MONITOR_TOKEN")
    path = tmp_path / "token"
    path.write_text("\t padded  \nsecond line\n")
    assert Settings.build(token_file=path).token.get_secret_value() == "padded"  # type: ignore[union-attr]
    config = tmp_path / "m.toml"
    config.write_text('token = " padded "\n')
    assert Settings.build(config=config).token.get_secret_value() == "padded"  # type: ignore[union-attr]


def test_allowed_hosts_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_MONITOR_ALLOWED_HOSTS", "monitor.internal, box.lan")
    assert Settings.build().allowed_hosts == ("monitor.internal", "box.lan")


@pytest.mark.parametrize(("value", "name"), [
    ("127.0.0.1:8000", "127.0.0.1"), ("LOCALHOST", "localhost"), ("[::1]:8000", "::1"),
    ("::1", "::1"), ("http://evil.example:8000", "evil.example"),
    ("https://Evil.Example/path", "evil.example"), ("null", "null"), ("", "")])
def test_host_name(value: str, name: str) -> None:
    assert host_name(value) == name


@pytest.mark.parametrize(("value", "origin"), [
    ("http://127.0.0.1:8000", ("http", "127.0.0.1", 8000)),
    ("http://LOCALHOST:8000", ("http", "localhost", 8000)),
    ("http://[::1]:8000", ("http", "::1", 8000)),
    ("http://monitor.internal", ("http", "monitor.internal", 80)),
    ("https://monitor.internal", ("https", "monitor.internal", 443)),
    ("null", None), ("", None), ("file:///tmp/x.html", None), ("http://a:b:c", None),
    ("http://127.0.0.1:8000/path", None)])
def test_origin_of(value: str, origin: tuple[str, str, int] | None) -> None:
    assert origin_of(value) == origin
