"""`llm-monitor stability` end to end against a local OpenAI-style chat-completions server
that fails sometimes (HTTP 500s, stalls past the client timeout)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from monitor.cli import main

pytestmark = pytest.mark.integration

QUESTIONS = [(f"q{i}", f"What is {i} plus {i + 3}?", [str(2 * i + 3), str(2 * i + 1),
                                                       str(2 * i + 5), "none of these"], 0)
             for i in range(30)]
ANSWER_TEXT = {q: opts[a] for _, q, opts, a in QUESTIONS}


class FlakyModel:
    """Answers correctly from the prompt, except that the first attempt of every 3rd prompt
    gets a 500 and of every 5th prompt stalls for longer than the client's timeout.
    With ``always_fail`` every request gets a 500."""

    def __init__(self, *, always_fail: bool = False) -> None:
        self.always_fail = always_fail
        self.attempts: Counter[str] = Counter()
        self.order: dict[str, int] = {}
        self.auth: set[str | None] = set()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.auth.add(request.headers.get("Authorization"))
        assert body["temperature"] == 0
        prompt = body["messages"][0]["content"]
        self.attempts[prompt] += 1
        k = self.order.setdefault(prompt, len(self.order))
        if self.always_fail:
            return web.Response(status=500, text="internal error")
        if self.attempts[prompt] == 1 and k % 3 == 0:
            return web.Response(status=500, text="try again")
        if self.attempts[prompt] == 1 and k % 5 == 1:
            await asyncio.sleep(6.0)
        return web.json_response({
            "id": "x", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": self.answer(prompt)}}],
        })

    @staticmethod
    def answer(prompt: str) -> str:
        question = next(q for q in ANSWER_TEXT if q in prompt)
        target = ANSWER_TEXT[question]
        pairs = re.findall(r"^([A-Z])\. (.*)$", prompt, flags=re.M) or \
            re.findall(r"\((\d+)\) ([^|\n]*?)(?: \||\n|$)", prompt)
        label = next(lab for lab, text in pairs if text.strip() == target)
        return f"The answer is {label}."


@pytest.fixture
def server() -> Iterator[Any]:
    started = threading.Event()
    holder: dict[str, Any] = {}

    def serve(model: FlakyModel) -> None:
        loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", model.handle)
        runner = web.AppRunner(app)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        holder["port"] = runner.addresses[0][1]
        holder["loop"] = loop
        started.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())

    def start(model: FlakyModel) -> str:
        t = threading.Thread(target=serve, args=(model,), daemon=True)
        t.start()
        started.wait(5)
        holder["thread"] = t
        return f"http://127.0.0.1:{holder['port']}/v1"

    yield start
    if "loop" in holder:
        holder["loop"].call_soon_threadsafe(holder["loop"].stop)
        holder["thread"].join(5)


@pytest.fixture
def items_file(tmp_path: Path) -> Path:
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"id": i, "question": q, "options": o, "answer": a}) + "\n"
                            for i, q, o, a in QUESTIONS))
    return path


def test_flaky_server_retries_and_loses_nothing(server: Any, items_file: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    model = FlakyModel()
    url = server(model)
    monkeypatch.setenv("TEST_KEY", "sk-test")
    events = tmp_path / "events.jsonl"
    rc = main(["stability", str(items_file), "--model", "m1", "--base-url", url,
               "--api-key-env", "TEST_KEY", "--timeout", "2", "--retries", "3",
               "--backoff", "0.05", "--events-out", str(events), "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    rep = json.loads(out.out)
    n_variants = len(QUESTIONS) * 5
    assert len(model.order) == n_variants  # every variant asked
    # every prompt that failed first time was retried and then answered: nothing lost
    assert rep["retries"] == sum(c - 1 for c in model.attempts.values()) > 0
    assert max(model.attempts.values()) == 2
    # a model that reads the options correctly never flips
    assert rep["accuracy_original"] == 1.0
    assert rep["flips"] == 0 and rep["flip_base"] == len(QUESTIONS) * 4
    assert rep["alarm"] is False
    assert model.auth == {"Bearer sk-test"}
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    assert len(lines) == n_variants
    assert Counter(x["variant"] for x in lines) == {
        "original": 30, "perturbed:paraphrase": 30, "perturbed:shuffle": 30,
        "perturbed:format": 30, "perturbed:noise": 30}
    assert all(x["score"] == 1.0 and x["model"] == "m1" for x in lines)
    try:
        from monitor.contracts import ItemResult
    except ImportError:
        return
    for x in lines:
        ItemResult.model_validate(x)


def test_server_that_keeps_failing_is_a_clear_error(server: Any, items_file: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    url = server(FlakyModel(always_fail=True))
    rc = main(["stability", str(items_file), "--model", "m1", "--base-url", url,
               "--retries", "2", "--backoff", "0.01", "--timeout", "2"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "failed 3 times" in err and "HTTP 500" in err
    assert "Traceback" not in err


def test_unreachable_endpoint_is_a_clear_error(items_file: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["stability", str(items_file), "--model", "m1", "--base-url",
               "http://127.0.0.1:9/v1", "--retries", "1", "--backoff", "0.01"])
    err = capsys.readouterr().err
    assert rc == 2 and "failed 2 times" in err and "Traceback" not in err
