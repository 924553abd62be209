"""``llm-monitor worker`` (the distributed runner on Kafka) and ``llm-monitor produce``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from monitor.commands._settings import SettingsCommand
from monitor.commands.run import (
    AlphaOpt,
    ConfigOpt,
    CorrectionOpt,
    DesignOpt,
    EvalIntervalOpt,
    ExcludeFlagOpt,
    FamilyOpt,
    IncludeLeakOpt,
    MarginOpt,
    PerPairSeriesOpt,
    PlannedOpt,
    PowerOpt,
    SamplesOpt,
    core_options,
)
from monitor.errors import ConfigError


def _need_kafka(module: str) -> None:
    """The Kafka runner's packages are the optional ``kafka`` extra: say so, not a traceback."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"the Kafka runner needs {module}: pip install 'llm-monitor[kafka]'")


def produce_file(
    paths: list[Path], *, broker: str, shuffle: bool = False, seed: int = 0,
    limit: int | None = None, benchmark: str | None = None, model: str | None = None,
    metric: str | None = None, exclude: tuple[str, ...] = (), cluster_col: str | None = None,
    partitions: int = 3,
) -> int:
    """Send the results of tables / lm-eval samples as ItemResult JSON, key = benchmark."""
    _need_kafka("kafka")
    from kafka import KafkaProducer

    from monitor.runners.kafka.admin import ensure_topics
    from monitor.runners.kafka.core import RESULTS_PRODUCER, RESULTS_TOPIC
    from monitor.runners.replay import ReplayStream, load_blocks
    from monitor.runners.settings import bootstrap_servers

    blocks = load_blocks(paths, benchmark=benchmark, model=model, metric=metric,
                         exclude=exclude, cluster_col=cluster_col)
    stream = ReplayStream(blocks, seed=seed if shuffle else None)
    total = len(stream) if limit is None else min(limit, len(stream))
    try:
        hosts = bootstrap_servers(broker)
    except ValueError as exc:
        raise ConfigError(f"--broker: {exc}") from None
    ensure_topics(hosts, partitions)
    producer = KafkaProducer(bootstrap_servers=hosts, acks="all", retries=5,
                             max_in_flight_requests_per_connection=1, **RESULTS_PRODUCER)
    sent = 0
    try:
        for lo in range(0, total, 10_000):
            for ev in stream.events(lo, min(lo + 10_000, total)):
                producer.send(RESULTS_TOPIC, key=ev.benchmark.encode(),
                              value=ev.model_dump_json(exclude_defaults=True).encode())
                sent += 1
        producer.flush(timeout=120)
    finally:
        producer.close(timeout=30)
    return sent


def register(app: typer.Typer) -> None:
    @app.command("worker", cls=SettingsCommand)
    def worker(
        config: ConfigOpt = None,
        broker: Annotated[str | None, typer.Option(help="Kafka bootstrap servers, kafka://host:port[,host:port]")] = None,
        partitions: Annotated[int | None, typer.Option(help="partitions of the results topic when it is created")] = None,
        metrics_port: Annotated[int | None, typer.Option(help="port of /metrics, 0 for any free port")] = None,
        metrics_host: Annotated[str | None, typer.Option(help="address of /metrics")] = None,
        group: Annotated[str | None, typer.Option(help="consumer group of the workers")] = None,
        alpha: AlphaOpt = None,
        power: PowerOpt = None,
        planned_models: PlannedOpt = None,
        family: FamilyOpt = None,
        correction: CorrectionOpt = None,
        per_pair_series: PerPairSeriesOpt = None,
        exclude_flag: ExcludeFlagOpt = None,
        include_leak_suspect: IncludeLeakOpt = None,
        eval_interval: EvalIntervalOpt = None,
        samples: SamplesOpt = None,
        design: DesignOpt = None,
        margin: MarginOpt = None,
        checkpoint_interval: Annotated[float | None, typer.Option(help="seconds between state checkpoints and offset commits")] = None,
        batch_size: Annotated[int | None, typer.Option(help="most records stepped at once")] = None,
        engine: Annotated[str | None, typer.Option(help="kafka (kafka-python) or faust")] = None,
    ) -> None:
        """Distributed monitor: consume llm-monitor.results, publish changes and dead letters.

        State (per-benchmark snapshots and source offsets) lives in the compacted topic
        llm-monitor.state, written before the consumer offsets are committed; a restarted
        worker resumes from it and never counts a result twice. See docs/distributed.md.
        """
        from monitor.runners.settings import Settings

        settings = Settings.build(
            config=config, serve_http=False, broker=broker, partitions=partitions,
            metrics_host=metrics_host, metrics_port=metrics_port, group=group,
            checkpoint_interval=checkpoint_interval, batch_size=batch_size, engine=engine,
            **core_options(alpha=alpha, power=power, planned_models=planned_models,
                           family=family, correction=correction,
                           per_pair_series=per_pair_series, exclude_flag=exclude_flag,
                           include_leak_suspect=include_leak_suspect,
                           eval_interval=eval_interval, samples=samples, design=design,
                           margin=margin),
        )
        _need_kafka("kafka")
        if settings.engine == "faust":
            _need_kafka("faust")
            from monitor.runners.kafka.faust_app import run_faust

            raise typer.Exit(run_faust(settings))
        from monitor.runners.kafka.worker import run_worker

        raise typer.Exit(run_worker(settings))

    @app.command("produce", cls=SettingsCommand)
    def produce(
        files: Annotated[list[Path], typer.Argument(help="tables or lm-eval samples_*.jsonl files")],
        broker: Annotated[str | None, typer.Option(help="Kafka bootstrap servers, kafka://host:port[,host:port]")] = None,
        shuffle: Annotated[bool, typer.Option(help="send in a seeded random order")] = False,
        seed: Annotated[int, typer.Option(help="seed of --shuffle")] = 0,
        limit: Annotated[int | None, typer.Option(help="send only the first N results")] = None,
        benchmark: Annotated[str | None, typer.Option(help="benchmark name (default: from the file)")] = None,
        model: Annotated[str | None, typer.Option(help="model of lm-eval samples")] = None,
        metric: Annotated[str | None, typer.Option(help="metric of lm-eval samples")] = None,
        exclude: Annotated[list[str] | None, typer.Option(help="wide tables: a column that is not a model")] = None,
        cluster_col: Annotated[str | None, typer.Option(help="column of item clusters")] = None,
        partitions: Annotated[int | None, typer.Option(help="partitions of the results topic if it is created")] = None,
    ) -> None:
        """Send results to llm-monitor.results as ItemResult JSON (key = benchmark)."""
        from monitor.runners.settings import Settings

        if limit is not None and limit < 0:
            raise ConfigError(f"--limit must not be negative, got {limit}")
        # The broker and the topic's partitions as the worker reads them (options, then
        # LLM_MONITOR_BROKER and LLM_MONITOR_PARTITIONS, then the defaults), so both sides meet.
        settings = Settings.build(serve_http=False, broker=broker, partitions=partitions)
        t0 = time.perf_counter()
        n = produce_file(list(files), broker=settings.broker, shuffle=shuffle, seed=seed,
                         limit=limit, benchmark=benchmark, model=model, metric=metric,
                         exclude=tuple(exclude or ()), cluster_col=cluster_col,
                         partitions=settings.partitions)
        dt = time.perf_counter() - t0
        print(f"llm-monitor: produced {n} results in {dt:.1f} s", file=sys.stderr)
