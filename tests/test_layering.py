"""Rooms (DESIGN 3): imports go down, and no file outgrows its room.

Every import of the apps, at module and function level, is parsed and none may climb from a lower
room into a higher one. No source file is over 600 lines, outside migrations and generated code.

Layers, bottom to top: ``models`` → ``common`` → ``accounts`` → ``trajectories`` → ``annotation``
→ ``workers`` → ``frontend`` / ``config``. ``models`` imports no Django at all. The same layers are
import-linter contracts in ``pyproject.toml`` (``lint-imports``, also run by ``.ci/run``), and no
module takes part in an import circle (function-level imports included). Inside ``models``, the
rendered world (``models.world``) stands apart: no model module imports it or its harnesses
(``models.demo``), and the world and the backends import nothing of each other.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {"models": 0, "common": 1, "accounts": 2, "trajectories": 3, "annotation": 4, "workers": 5,
          "frontend": 6, "config": 6}
#: Third-party packages that mean "Django" and may not appear under ``models/``.
DJANGO_PACKAGES = {"django", "rest_framework", "drf_spectacular", "celery"}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import statement in a file, nested ones included."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
    return found


def upward_imports() -> list[str]:
    """Every import that climbs, as ``path:line: room -> room (module)``."""
    bad = []
    for room, level in LAYERS.items():
        for path in sorted((ROOT / room).rglob("*.py")):
            if {"node_modules", "static"} & set(path.parts):
                continue
            for line, module in _imports(path):
                top = module.split(".")[0]
                target = LAYERS.get(top)
                climbs = target is not None and target > level
                django_in_models = room == "models" and top in DJANGO_PACKAGES
                if climbs or django_in_models:
                    bad.append(f"{path.relative_to(ROOT)}:{line}: {room} -> {top} ({module})")
    return bad


def test_imports_only_go_down():
    bad = upward_imports()
    assert not bad, f"{len(bad)} imports climb the layers:\n" + "\n".join(bad)


MAX_LINES = 600
SOURCE_DIRS = [*LAYERS, "tests"]
SOURCE_SUFFIXES = {".py", ".ts", ".tsx", ".css"}
SKIPPED_DIRS = {"migrations", "node_modules", "static", "__pycache__"}


def long_files() -> list[str]:
    """Source files over ``MAX_LINES`` lines (migrations and ``*.gen.*`` files are generated)."""
    found = []
    for folder in SOURCE_DIRS:
        for top, dirs, files in os.walk(ROOT / folder):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            for name in sorted(files):
                path = Path(top) / name
                if path.suffix not in SOURCE_SUFFIXES or ".gen." in name:
                    continue
                lines = len(path.read_text().splitlines())
                if lines > MAX_LINES:
                    found.append(f"{path.relative_to(ROOT)}: {lines} lines")
    return found


def test_no_file_outgrows_its_room():
    assert not long_files(), "split these by responsibility:\n" + "\n".join(long_files())


def test_the_check_sees_a_climb(tmp_path, monkeypatch):
    """The parser finds module-level, function-level and relative imports."""
    room = tmp_path / "trajectories"
    room.mkdir()
    (room / "__init__.py").write_text("")
    (room / "x.py").write_text("import os\nfrom annotation import rules\n"
                               "def f():\n    import workers.tasks\n    from . import y\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    bad = upward_imports()
    assert [b.split(": ", 1)[1] for b in bad] == ["trajectories -> annotation (annotation)",
                                                  "trajectories -> workers (workers.tasks)"]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_circles() -> list[list[str]]:
    """Every set of modules that import one another in a circle (strongly connected components of
    the module graph, function-level imports included), each sorted."""
    modules = {}
    for room in LAYERS:
        for path in sorted((ROOT / room).rglob("*.py")):
            if not {"node_modules", "static", "migrations"} & set(path.parts):
                modules[_module_name(path)] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for _, module in _imports(path):
            parts = module.split(".")
            target = next((".".join(parts[:k]) for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in modules),
                          None)
            if target is not None and target != name:
                graph[name].add(target)
    return _strongly_connected(graph)


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one node, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles():
    circles = import_circles()
    assert not circles, "modules that import one another:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_sees_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _strongly_connected(graph) == [["a", "b", "c"]]


def test_the_import_contracts_hold():
    """``lint-imports`` (import-linter) keeps the contracts of ``pyproject.toml``."""
    result = subprocess.run([str(Path(sys.executable).with_name("lint-imports"))], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_contracts_keep_the_world_apart():
    """Every model package and top-level model module is forbidden the world and its harnesses,
    so a new one is covered too; the world and the backends are independent."""
    contracts = _contracts()
    apart = [c for c in contracts if c["type"] == "forbidden"
             and {"models.world", "models.demo"} <= set(c["forbidden_modules"])]
    assert len(apart) == 1, "one forbidden contract names models.world and models.demo"
    models = ROOT / "models"
    model_side = ({f"models.{p.stem}" for p in models.glob("*.py") if p.stem != "__init__"}
                  | {f"models.{p.parent.name}" for p in models.glob("*/__init__.py")}) - {"models.world", "models.demo"}
    assert model_side - set(apart[0]["source_modules"]) == set()
    assert any(c["type"] == "independence" and {"models.world", "models.backends"} <= set(c["modules"])
               for c in contracts)
    world_imports = [c for c in contracts if c["type"] == "forbidden" and c["source_modules"] == ["models.world"]]
    assert world_imports and "models.demo" in world_imports[0]["forbidden_modules"]


if __name__ == "__main__":  # pragma: no cover - a report for people
    for entry in upward_imports():
        print(entry)
    pytest.main([__file__, "-q"])
