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
    "viz": {"ir", "memory"},
}

# Modules allowed more than their room, named by path under ``ge/``. ``partition`` plans
# from graphs alone; only its runner compiles and runs the partitions (importing the
# compiler and the session when called), as ``distributed`` does, and only its
# visualizer draws (through ``viz``). The NumPy engine's ``If`` compiles each branch and
# runs it in a session of its own, importing both when a branch first runs.
MODULE_EXTRAS: dict[str, set[str]] = {
    "partition/runner.py": {"compiler", "session"},
    "engines/numpy/control.py": {"compiler", "session"},
    "partition/visualizer.py": {"viz"},
}

# The public surface: the package root, the error types every room raises, and the two
# front doors over the public API (the ``ge`` command and ONNX's backend interface).
PUBLIC_SURFACE = {"__init__", "errors", "cli", "backend", "benchmark"}


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


def rooms_on_disk() -> set[str]:
    """Every module and package directly under ``ge/`` (a folder counts when it holds
    Python files, with or without an ``__init__.py``)."""
    found = set()
    for entry in PACKAGE.iterdir():
        if entry.is_file() and entry.suffix == ".py":
            found.add(entry.stem)
        elif entry.is_dir() and entry.name != "__pycache__" and any(entry.rglob("*.py")):
            found.add(entry.name)
    return found


def test_every_module_under_ge_is_a_fenced_room_or_the_public_surface():
    """A new module or package under ``ge/`` must be given its fence in ``ALLOWED`` (or be
    named part of the public surface) before it can exist."""
    unfenced = sorted(rooms_on_disk() - ALLOWED.keys() - PUBLIC_SURFACE)
    assert not unfenced, f"rooms without a fence in tests/test_rooms.py: {unfenced}"


def test_the_fence_check_sees_a_new_room(tmp_path, monkeypatch):
    """The check above is not vacuous: a planted module and package are both reported."""
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "__init__.py").write_text("")
    (tmp_path / "shortcuts.py").write_text("")
    (tmp_path / "sneaky").mkdir()
    (tmp_path / "sneaky" / "tool.py").write_text("")
    (tmp_path / "data").mkdir()  # no Python in it: not a room
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    assert rooms_on_disk() == {"ops", "shortcuts", "sneaky"}
    assert sorted(rooms_on_disk() - ALLOWED.keys() - PUBLIC_SURFACE) == ["shortcuts", "sneaky"]


def test_every_room_imports_only_what_it_may():
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        room = room_of(path)
        if room not in ALLOWED:
            continue  # the public surface (checked above: nothing else is unfenced)
        allowed = ALLOWED[room] | MODULE_EXTRAS.get(path.relative_to(PACKAGE).as_posix(), set())
        for other in imported_rooms(path) - allowed - {room}:
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
    # the benchmark harness times onnxruntime and PyTorch eager as GE's peers
    allowed = {"onnx": ("frontends/onnx/", "backend.py"),
               "onnxruntime": ("frontends/onnx/", "benchmark.py"),
               "torch": ("frontends/torch", "engines/torch", "benchmark.py"),
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
