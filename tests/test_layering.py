"""Rooms (DESIGN 3): imports go down, and no file outgrows its room.

Every import of the apps, at module and function level, is parsed and none may climb from a lower
room into a higher one. No source file is over 600 lines, outside migrations and generated code.

Layers, bottom to top: ``models`` → ``common`` / ``accounts`` → ``trajectories`` → ``annotation``
→ ``workers`` → ``frontend`` / ``config``. ``models`` imports no Django at all.
"""
from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {"models": 0, "common": 1, "accounts": 1, "trajectories": 2, "annotation": 3, "workers": 4,
          "frontend": 5, "config": 5}
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


if __name__ == "__main__":  # pragma: no cover - a report for people
    for entry in upward_imports():
        print(entry)
    pytest.main([__file__, "-q"])
