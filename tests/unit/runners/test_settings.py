"""Settings of the live monitor: sizes, tokens, the loopback rule, environment prefix."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from monitor.errors import ConfigError
from monitor.runners.settings import Settings, is_loopback, parse_size


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


def test_settings_file_env_and_flags_in_that_order(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("ALPHA", "POWER", "CORRECTION", "EXCLUDE_FLAGS"):
        monkeypatch.delenv(f"LLM_MONITOR_{key}", raising=False)
    toml = tmp_path / "monitor.toml"
    toml.write_text('alpha = 0.01\npower = 0.9\ncorrection = "holm"\n'
                    'exclude_flags = ["leak-suspect", "canary"]\nbroker = "kafka://k:9092"\n')
    s = Settings.build(config=toml)
    assert (s.alpha, s.power, s.correction, s.bootstrap) == (0.01, 0.9, "holm", ["k:9092"])
    assert s.core_config().exclude_flags == ("leak-suspect", "canary")
    monkeypatch.setenv("LLM_MONITOR_POWER", "0.95")  # the environment beats the file
    monkeypatch.setenv("LLM_MONITOR_EXCLUDE_FLAGS", "canary, other")
    s = Settings.build(config=toml, alpha=0.02)  # a flag beats both
    assert (s.alpha, s.power, s.exclude_flags) == (0.02, 0.95, ("canary", "other"))


@pytest.mark.parametrize(("name", "text"), [
    ("m.json", '{"family": "all", "per_pair_series": "all", "include_leak_suspect": true}'),
    ("m.yaml", "family: all\nper_pair_series: all\ninclude_leak_suspect: true\n"),
])
def test_json_and_yaml_settings_files(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    core = Settings.build(config=tmp_path / name).core_config()
    assert (core.family, core.per_pair_series, core.exclude_flags) == ("all", "all", ())


def test_yaml_settings_need_no_dev_install() -> None:
    # `make run` installs the runtime dependencies only, and --config takes YAML there too.
    meta = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    runtime = {d.split(">")[0].split("=")[0].split("[")[0].strip().lower()
               for d in meta["project"]["dependencies"]}
    assert "pyyaml" in runtime, meta["project"]["dependencies"]


def test_yaml_settings_without_pyyaml_name_the_fix(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.yml"
    path.write_text("family: all\n")
    monkeypatch.setitem(sys.modules, "yaml", None)  # `import yaml` now fails as if absent
    with pytest.raises(ConfigError) as err:
        Settings.build(config=path)
    text = str(err.value)
    assert "not valid YAML" not in text
    assert f"--config {path}" in text and "pip install pyyaml" in text, text
    assert ".toml or .json" in text, text
    monkeypatch.undo()  # and with PyYAML, a broken file is still called what it is
    path.write_text("family: [all\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        Settings.build(config=path)


def test_errors_name_the_option_the_variable_and_the_file_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('correction = "sidak"\nalpah = 0.1\n')
    with pytest.raises(ConfigError) as err:
        Settings.build(config=bad)
    text = str(err.value)
    assert "invalid setting 'correction' (option --correction, env LLM_MONITOR_CORRECTION, " \
           f"key correction in {bad})" in text
    assert "must be one of none, bonferroni, holm, bh" in text
    assert f"unknown setting 'alpah' in {bad}" in text
    with pytest.raises(ConfigError, match=r"--config .*use a \.toml"):
        Settings.build(config=tmp_path / "x.ini")
    (tmp_path / "broken.toml").write_text("alpha = = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        Settings.build(config=tmp_path / "broken.toml")
    with pytest.raises(ConfigError, match="LLM_MONITOR_BROKER"):
        Settings.build(broker="no-port-here")


def test_non_loopback_refused_only_where_http_is_served(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLM_MONITOR_TOKEN", raising=False)
    monkeypatch.setenv("LLM_MONITOR_HOST", "0.0.0.0")  # e.g. one ConfigMap for both runners
    with pytest.raises(ConfigError, match="without a token"):
        Settings.build()
    assert Settings.build(serve_http=False).host == "0.0.0.0"


CORE_FLAGS = ["--alpha", "0.02", "--power", "0.9", "--family", "all", "--correction", "bh",
              "--per-pair-series", "all", "--exclude-flag", "canary", "--include-leak-suspect",
              "--eval-interval", "0.5"]


def _captured(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> Settings:
    """The Settings the CLI builds for ``args``, caught where the runner would start."""
    from typer.testing import CliRunner

    import monitor.commands.run as run_cmd
    import monitor.runners.kafka.worker as kafka_worker
    from monitor.cli import app

    got: list[Settings] = []
    def run_worker(settings: Settings) -> int:
        got.append(settings)
        return 0

    monkeypatch.setattr(run_cmd, "_start", lambda settings, **kw: got.append(settings))
    monkeypatch.setattr(kafka_worker, "run_worker", run_worker)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (settings,) = got
    return settings


def test_every_core_option_means_the_same_in_every_runner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    embedded = _captured(monkeypatch, ["run", "--db", str(tmp_path / "m.db"), *CORE_FLAGS])
    worker = _captured(monkeypatch, ["worker", *CORE_FLAGS])
    assert embedded.core_config() == worker.core_config()
    core = worker.core_config()
    assert (core.alpha, core.power, core.family, core.correction, core.per_pair_series,
            core.exclude_flags) == (0.02, 0.9, "all", "bh", "all", ("canary",))
    assert worker.eval_interval == embedded.eval_interval == 0.5
    # The worker reads the environment too (it used to take options only).
    monkeypatch.setenv("LLM_MONITOR_CORRECTION", "holm")
    monkeypatch.setenv("LLM_MONITOR_BATCH_SIZE", "77")
    from_env = _captured(monkeypatch, ["worker"])
    assert (from_env.correction, from_env.batch_size) == ("holm", 77)


def test_the_core_options_have_one_home() -> None:
    """The settings' core defaults are CoreConfig's own (the CLI help shows the settings'):
    nothing typed twice can drift."""
    from monitor.core.config import BenchmarkSpec, CoreConfig
    from monitor.runners.settings import BenchmarkSettings

    assert Settings.build(serve_http=False).core_config() == CoreConfig()
    assert BenchmarkSettings().spec() == BenchmarkSpec()
