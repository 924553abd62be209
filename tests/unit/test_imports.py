"""The import graph of monitor/ runs one way: no cycle, no runner or sink reaching into the
CLI, and no module importing a layer above its own. And the quick commands (``--help``,
``power``) import none of the heavy modules that would make them slow to start.

Every module is parsed with ``ast`` (imports inside functions and ``TYPE_CHECKING`` blocks
count too: a deferred import hides a dependency, it does not remove it), so the test needs
none of the optional packages the runners import. The quick commands are run in a fresh
interpreter, which reports the modules it imported.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "monitor"

# Imports run one way: contracts → stats → core / offline → runners / sinks → commands.
# A module may import its own layer or any layer below it.
LAYERS: dict[str, int] = {
    "monitor": 0,  # the package root: only a docstring and __version__
    "monitor.contracts": 0,
    "monitor.decoder": 0,  # reads bodies into the contract's events (imports contracts only)
    "monitor.errors": 0,
    "monitor.defaults": 0,
    "monitor.wire": 0,
    "monitor.stats": 1,
    "monitor.core": 2,
    "monitor.offline": 2,
    "monitor.io": 2,
    "monitor.audit": 2,
    "monitor.runners": 3,  # with runners.settings: it derives the core's configuration
    "monitor.sinks": 3,
    "monitor.client": 3,  # the HTTP client of a running monitor: a transport, like the runners
    "monitor.integrations": 3,  # harnesses posting to a monitor through the client
    "monitor.commands": 4,
    "monitor.cli": 4,
}
LAYER_NAMES = {0: "contracts/errors", 1: "stats", 2: "core/offline/io/audit",
               3: "runners/sinks", 4: "commands/cli"}


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``line`` of ``path``."""

    source: str
    target: str
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path.relative_to(PACKAGE.parent)}:{self.line}: {self.source} -> {self.target}"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The deepest monitor module that ``name`` (a module or an attribute of one) names."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _edges(module: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    out: list[Edge] = []

    def add(target: str | None, line: int) -> None:
        if target is not None and target != module:
            out.append(Edge(module, target, path, line))

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "monitor" or alias.name.startswith("monitor."):
                    add(_resolve(alias.name, modules), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                base = ".".join(anchor[: len(anchor) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            if base != "monitor" and not base.startswith("monitor."):
                continue
            for alias in node.names:
                # `from pkg import name`: the submodule pkg.name when there is one, else pkg.
                add(_resolve(f"{base}.{alias.name}", modules), node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and node.args[0].value.startswith("monitor")):
            add(_resolve(node.args[0].value, modules), node.lineno)
    return out


def _graph() -> tuple[dict[str, Path], list[Edge]]:
    modules = _modules()
    return modules, [e for m, p in modules.items() for e in _edges(m, p, modules)]


def _layer(module: str) -> int | None:
    name = module
    while name:
        if name in LAYERS:
            return LAYERS[name]
        name = name.rpartition(".")[0]
    return None


def _cycles(modules: dict[str, Path], edges: list[Edge]) -> list[list[Edge]]:
    """One concrete cycle per strongly connected component with more than one module."""
    succ: dict[str, list[Edge]] = {m: [] for m in modules}
    for e in edges:
        succ[e.source].append(e)
    # Tarjan's algorithm, iterative so a deep graph cannot hit the recursion limit.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            if i < len(succ[v]):
                work.append((v, i + 1))
                w = succ[v][i].target
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                components.append(comp)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    cycles = []
    for comp in components:
        if len(comp) < 2:
            continue
        members = set(comp)
        start = min(comp)
        # Breadth-first from start back to start inside the component: a shortest cycle.
        prev: dict[str, Edge] = {}
        frontier = [start]
        found: Edge | None = None
        while frontier and found is None:
            nxt = []
            for v in frontier:
                for e in succ[v]:
                    if e.target not in members:
                        continue
                    if e.target == start:
                        found = e
                        break
                    if e.target not in prev:
                        prev[e.target] = e
                        nxt.append(e.target)
                if found is not None:
                    break
            frontier = nxt
        assert found is not None  # a strongly connected component always closes
        path = [found]
        while path[0].source != start:
            path.insert(0, prev[path[0].source])
        cycles.append(path)
    return cycles


def test_the_graph_is_read() -> None:
    # Guards the parser itself: known edges must be found, or every rule below passes vacuously.
    modules, edges = _graph()
    pairs = {(e.source, e.target) for e in edges}
    assert len(modules) > 40
    assert ("monitor.commands.power", "monitor.offline.power") in pairs  # inside a function
    assert ("monitor.commands.report", "monitor.io.sources") in pairs
    assert ("monitor.offline.compare", "monitor.stats.paired_tests") in pairs  # `import ... as`


def test_every_module_has_a_layer() -> None:
    modules, _ = _graph()
    missing = sorted(m for m in modules if _layer(m) is None)
    assert not missing, f"modules with no layer in LAYERS: {missing}"


def test_no_import_cycle() -> None:
    modules, edges = _graph()
    cycles = _cycles(modules, edges)
    report = "\n\n".join(" -> ".join([c[0].source, *(e.target for e in c)]) + "\n  "
                         + "\n  ".join(map(str, c)) for c in cycles)
    assert not cycles, f"import cycles in monitor/:\n{report}"


def test_runners_and_sinks_do_not_import_the_cli() -> None:
    _, edges = _graph()
    bad = [e for e in edges
           if e.source.startswith(("monitor.runners", "monitor.sinks"))
           and (e.target == "monitor.cli" or e.target.startswith("monitor.commands"))]
    assert not bad, "runners/sinks importing the CLI layer:\n" + "\n".join(map(str, bad))


def test_no_module_imports_a_layer_above_its_own() -> None:
    _, edges = _graph()
    bad = []
    for e in edges:
        src, dst = _layer(e.source), _layer(e.target)
        if src is not None and dst is not None and dst > src:
            bad.append(f"{e}  ({LAYER_NAMES[src]} imports {LAYER_NAMES[dst]})")
    assert not bad, "upward imports:\n" + "\n".join(bad)


# --- What the quick commands import --------------------------------------------------------
# `llm-monitor --help` and every form of `llm-monitor power` must start within 0.5 s (issue 10,
# "Fast start"; bench/bench_startup.py times them). A timing test would be flaky on a shared
# machine, so this checks the cause instead: which modules a fresh interpreter holds after
# running the command. Neither imports pydantic (typer 0.29 would: pyproject.toml pins below it)
# nor the module of another command.

_PROBE = """
import contextlib, io, json, sys
from monitor.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    status = main(sys.argv[1:])
print(json.dumps({"status": status, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""
_PLAN = ["--pa", "0.65", "--pb", "0.60", "--rho", "0.30"]
# scipy.stats, and scipy.interpolate through scipy.optimize, each cost more than the whole
# budget; the table of N*_AV solves its spline without them (and without scipy.linalg).
_NEVER = ("scipy.stats", "scipy.interpolate", "scipy.optimize", "scipy.linalg",
          "monitor.contracts", "aiohttp", "prometheus_client", "pydantic")
#: what only --help, which lists every command, may import
_OTHER_COMMANDS = ("monitor.commands.report", "monitor.commands.run")


def _run_cli(args: list[str]) -> tuple[str, set[str]]:
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout)
    assert probe["status"] == 0, probe["out"]
    return probe["out"], set(probe["modules"])


def _imported(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if n in modules]


def test_help_imports_no_statistics_and_no_pydantic() -> None:
    out, modules = _run_cli(["--help"])
    assert "power" in out and "report" in out  # the help really listed the commands
    bad = _imported(modules, (*_NEVER, "numpy", "scipy", "pydantic", "monitor.stats"))
    assert not bad, f"llm-monitor --help imports {bad} (find the importer: python -X importtime)"


@pytest.mark.parametrize("extra", [[], ["--n", "1200"]], ids=["plan", "with-n"])
def test_power_json_imports_no_scipy_stats_contracts_or_rich(extra: list[str]) -> None:
    out, modules = _run_cli(["power", *_PLAN, *extra, "--json"])
    fig = json.loads(out)
    assert fig["n_star"] == 1028 and fig["n_star_anytime"] > fig["n_star"]
    assert "scipy.special" in modules  # the plan was computed in this process
    bad = _imported(modules, (*_NEVER, *_OTHER_COMMANDS, "rich"))
    assert not bad, f"llm-monitor power --json imports {bad} (find the importer: python -X importtime)"


@pytest.mark.parametrize("extra", [[], ["--n", "1200"]], ids=["plan", "with-n"])
def test_power_table_imports_no_scipy_stats_or_contracts(extra: list[str]) -> None:
    out, modules = _run_cli(["power", *_PLAN, *extra])
    assert "n_star_anytime" in out
    assert "rich" in modules  # the table needs it: the probe sees what the command imports
    bad = _imported(modules, (*_NEVER, *_OTHER_COMMANDS))
    assert not bad, f"llm-monitor power imports {bad} (find the importer: python -X importtime)"
