"""``llm-monitor worker`` (the distributed runner on Kafka) and ``llm-monitor produce``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from monitor.errors import ConfigError


def produce_file(
    paths: list[Path], *, broker: str, shuffle: bool = False, seed: int = 0,
    limit: int | None = None, benchmark: str | None = None, model: str | None = None,
    metric: str | None = None, exclude: tuple[str, ...] = (), cluster_col: str | None = None,
    partitions: int = 3,
) -> int:
    """Send the results of tables / lm-eval samples as ItemResult JSON, key = benchmark."""
    from kafka import KafkaProducer

    from monitor.runners.kafka_core import RESULTS_TOPIC
    from monitor.runners.kafka_worker import bootstrap_servers, ensure_topics
    from monitor.runners.replay import ReplayStream, load_blocks

    blocks = load_blocks(paths, benchmark=benchmark, model=model, metric=metric,
                         exclude=exclude, cluster_col=cluster_col)
    stream = ReplayStream(blocks, seed=seed if shuffle else None)
    total = len(stream) if limit is None else min(limit, len(stream))
    hosts = bootstrap_servers(broker)
    ensure_topics(hosts, partitions)
    producer = KafkaProducer(bootstrap_servers=hosts, acks="all", linger_ms=20,
                             batch_size=256 << 10, retries=5,
                             max_in_flight_requests_per_connection=1)
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
    @app.command("worker")
    def worker(
        broker: Annotated[str, typer.Option(help="Kafka bootstrap servers, kafka://host:port[,host:port]")] = "kafka://127.0.0.1:9092",
        partitions: Annotated[int, typer.Option(help="partitions of the results topic when it is created")] = 3,
        metrics_port: Annotated[int, typer.Option(help="port of /metrics (0: any free port)")] = 9308,
        metrics_host: Annotated[str, typer.Option(help="address of /metrics")] = "127.0.0.1",
        group: Annotated[str, typer.Option(help="consumer group of the workers")] = "llm-monitor",
        alpha: Annotated[float, typer.Option(help="family level α of the verdicts")] = 0.05,
        power: Annotated[float, typer.Option(help="target power for N*")] = 0.8,
        family: Annotated[str, typer.Option(help="adjacent or all")] = "adjacent",
        eval_interval: Annotated[float, typer.Option(help="seconds between verdict evaluations under load")] = 0.25,
        checkpoint_interval: Annotated[float, typer.Option(help="seconds between state checkpoints (and offset commits)")] = 2.0,
        batch_size: Annotated[int, typer.Option(help="most records stepped at once")] = 5000,
        engine: Annotated[str, typer.Option(help="kafka (kafka-python, default) or faust")] = "kafka",
    ) -> None:
        """Distributed monitor: consume llm-monitor.results, publish changes and dead letters.

        State (per-benchmark snapshots and source offsets) lives in the compacted topic
        llm-monitor.state, written before the consumer offsets are committed; a restarted
        worker resumes from it and never counts a result twice. See docs/distributed.md.
        """
        from monitor.runners.kafka_worker import WorkerOptions, run_worker

        if not 0.0 < alpha < 1.0:
            raise ConfigError(f"--alpha must be in (0, 1), got {alpha}")
        if not 0.0 < power < 1.0:
            raise ConfigError(f"--power must be in (0, 1), got {power}")
        if family not in ("adjacent", "all"):
            raise ConfigError(f"--family must be 'adjacent' or 'all', got {family!r}")
        if partitions < 1 or batch_size < 1 or checkpoint_interval <= 0 or eval_interval < 0:
            raise ConfigError("--partitions, --batch-size and --checkpoint-interval must be "
                              "positive, --eval-interval not negative")
        opts = WorkerOptions(
            broker=broker, partitions=partitions, metrics_host=metrics_host,
            metrics_port=metrics_port, group=group, alpha=alpha, power=power, family=family,
            eval_interval=eval_interval, checkpoint_interval=checkpoint_interval,
            batch_size=batch_size,
        )
        if engine == "faust":
            from monitor.runners.faust_app import run_faust

            raise typer.Exit(run_faust(opts))
        if engine != "kafka":
            raise ConfigError(f"--engine must be 'kafka' or 'faust', got {engine!r}")
        raise typer.Exit(run_worker(opts))

    @app.command("produce")
    def produce(
        files: Annotated[list[Path], typer.Argument(help="tables or lm-eval samples_*.jsonl files")],
        broker: Annotated[str, typer.Option(help="Kafka bootstrap servers")] = "kafka://127.0.0.1:9092",
        shuffle: Annotated[bool, typer.Option(help="send in a seeded random order")] = False,
        seed: Annotated[int, typer.Option(help="seed of --shuffle")] = 0,
        limit: Annotated[int | None, typer.Option(help="send only the first N results")] = None,
        benchmark: Annotated[str | None, typer.Option(help="benchmark name (default: from the file)")] = None,
        model: Annotated[str | None, typer.Option(help="model of lm-eval samples")] = None,
        metric: Annotated[str | None, typer.Option(help="metric of lm-eval samples")] = None,
        exclude: Annotated[list[str] | None, typer.Option(help="wide tables: a column that is not a model")] = None,
        cluster_col: Annotated[str | None, typer.Option(help="column of item clusters")] = None,
        partitions: Annotated[int, typer.Option(help="partitions if the topic is created")] = 3,
    ) -> None:
        """Send results to llm-monitor.results as ItemResult JSON (key = benchmark)."""
        if limit is not None and limit < 0:
            raise ConfigError(f"--limit must not be negative, got {limit}")
        t0 = time.perf_counter()
        n = produce_file(list(files), broker=broker, shuffle=shuffle, seed=seed, limit=limit,
                         benchmark=benchmark, model=model, metric=metric,
                         exclude=tuple(exclude or ()), cluster_col=cluster_col,
                         partitions=partitions)
        dt = time.perf_counter() - t0
        print(f"llm-monitor: produced {n} results in {dt:.1f} s", file=sys.stderr)
