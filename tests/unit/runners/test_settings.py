"""Settings of the live monitor: sizes, tokens, the loopback rule, environment prefix."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.errors import ConfigError
from monitor.settings import Settings, is_loopback, parse_size


@pytest.mark.parametrize(("text", "value"), [
    ("10MB", 10_000_000), ("512k", 512_000), ("1MiB", 1_048_576), ("2 gb", 2_000_000_000),
    ("1048576", 1_048_576), (42, 42),
])
def test_parse_size(text: str | int, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "ten", "-5", "0", "5 parsecs"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="max_body_bytes"):
        parse_size(text)


@pytest.mark.parametrize(("host", "loop"), [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("192.168.1.5", False), ("example.org", False),
])
def test_is_loopback(host: str, loop: bool) -> None:
    assert is_loopback(host) is loop


def test_non_loopback_needs_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLM_MONITOR_TOKEN", raising=False)
    with pytest.raises(ConfigError, match=r"refusing to listen on '0\.0\.0\.0' without a token"):
        Settings.build(host="0.0.0.0")
    token = tmp_path / "token"
    token.write_text("abc123\nignored second line\n")
    s = Settings.build(host="0.0.0.0", token_file=token)
    assert s.token is not None and s.token.get_secret_value() == "abc123"
    assert "abc123" not in repr(s)


def test_environment_and_cli_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_MONITOR_PORT", "9123")
    monkeypatch.setenv("LLM_MONITOR_TOKEN", "from-env")
    monkeypatch.setenv("LLM_MONITOR_MAX_BODY_BYTES", "1MB")
    s = Settings.build(port=None, host="0.0.0.0")
    assert (s.port, s.max_body_bytes) == (9123, 1_000_000)
    assert s.token is not None and s.token.get_secret_value() == "from-env"
    assert Settings.build(port=8001).port == 8001


def test_bad_values_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'alpha'"):
        Settings.build(alpha=1.5)
    with pytest.raises(ConfigError, match="--token-file"):
        Settings.build(token_file=tmp_path / "missing")
    (tmp_path / "empty").write_text("  \n")
    with pytest.raises(ConfigError, match="empty"):
        Settings.build(token_file=tmp_path / "empty")
    s = Settings.build()
    with pytest.raises(Exception, match="frozen"):
        s.port = 1


def test_leak_suspect_exclusion_on_by_default_and_off_on_request(tmp_path: Path) -> None:
    assert Settings.build(db=tmp_path / "a.db").core_config().exclude_flags == ("leak-suspect",)
    off = Settings.build(db=tmp_path / "a.db", include_leak_suspect=True)
    assert off.core_config().exclude_flags == ()
