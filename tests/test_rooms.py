"""The package's rooms import only what DESIGN.md allows them to (data flows one way)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ge"

# room -> the rooms it may import. Every room may import ``ge.errors``; ``ge.ir`` is the
# common vocabulary of every room above the runtime.
ALLOWED: dict[str, set[str]] = {
    "ir": set(),
    "ops": {"ir"},
    "builder": {"ir", "ops"},
    "frontends": {"ir", "ops", "builder"},
    "passes": {"ir", "ops"},
    "graphpass": {"ir", "ops", "passes"},
    "memory": {"ir", "ops"},
    "partition": {"ir", "ops", "memory"},
    "runtime": set(),
    "engines": {"ir", "ops", "runtime"},
    "compiler": {"ir", "ops", "passes", "memory", "partition", "engines", "runtime"},
    "session": {"ir", "compiler", "runtime"},
    "distributed": {"ir", "partition", "session", "compiler", "runtime"},
}


def room_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py")


def imported_rooms(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    rooms: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "ge" and len(parts) > 1:
                rooms.add(parts[1])
    return rooms - {"errors"}


def test_every_room_imports_only_what_it_may():
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        room = room_of(path)
        if room not in ALLOWED:
            continue  # the package root, errors, cli: the public surface
        for other in imported_rooms(path) - ALLOWED[room] - {room}:
            violations.append(f"{path.relative_to(PACKAGE.parent)} ({room}) imports ge.{other}")
    assert not violations, "\n".join(violations)


def test_numpy_is_the_only_hard_dependency():
    heavy = {"torch", "onnx", "onnxruntime", "tensorflow", "ray", "matplotlib", "ml_dtypes"}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only: lazy imports inside functions are fine
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in heavy]
    assert not offenders, offenders
