"""The package's rooms import only what DESIGN.md allows them to (data flows one way)."""

from __future__ import annotations

import ast
import subprocess
import sys
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
    """``import ge`` (and building, compiling, running) loads no optional framework."""
    script = (
        "import sys, numpy as np, ge\n"
        "g = ge.Graph('g')\n"
        "x = g.add_op(ge.OperatorFactory.create_op('Data').set_attr('name', 'x')"
        ".set_attr('shape', [2]).build())\n"
        "r = g.add_op(ge.OperatorFactory.create_op('Relu').set_input('x', x).build())\n"
        "g.set_outputs([r])\n"
        "ge.Session(ge.compile(g)).run({'x': np.ones(2, np.float32)})\n"
        "heavy = {'torch', 'onnx', 'onnxruntime', 'tensorflow', 'ray', 'matplotlib', 'numba'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               check=True)
    assert completed.stdout.strip() == "[]"


def test_foreign_frameworks_are_imported_only_in_their_rooms():
    allowed = {"onnx": ("frontends/onnx/", "backend.py"), "onnxruntime": ("frontends/onnx/",),
               "torch": ("frontends/torch", "engines/torch"),
               "tensorflow": ("frontends/tensorflow",), "ray": ("distributed/",),
               "numba": ("engines/fused/",)}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                root = name.split(".")[0]
                if root in allowed and not relative.startswith(allowed[root]):
                    offenders.append(f"{relative}: {name}")
    assert not offenders, offenders
