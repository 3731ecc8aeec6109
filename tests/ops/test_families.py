"""Every op family is registered from ``ge/ops/__init__.py``, and no family module
registers another by importing it at its bottom."""

from __future__ import annotations

import ast
from pathlib import Path

import ge.ops

OPS = Path(ge.ops.__file__).parent
#: modules of the ops room that hold no op family (the registry and shared helpers)
NOT_FAMILIES = {"__init__", "registry", "interpreter", "shape_utils", "nn_window"}


def _families_imported_by_the_package() -> set[str]:
    tree = ast.parse((OPS / "__init__.py").read_text())
    return {alias.name for node in tree.body if isinstance(node, ast.ImportFrom)
            and node.module == "ge.ops" for alias in node.names}


def test_every_family_module_is_imported_by_the_package():
    families = {path.stem for path in OPS.glob("*.py")} - NOT_FAMILIES
    assert families - _families_imported_by_the_package() == set()


def test_the_modules_that_are_not_families_register_nothing():
    for name in NOT_FAMILIES - {"__init__", "registry"}:
        text = (OPS / f"{name}.py").read_text()
        assert "register_op(" not in text and "register_unary(" not in text, name


def test_no_module_imports_after_its_code():
    """An import below the first definition is how a family used to register another."""
    late = []
    for path in sorted(OPS.glob("*.py")):
        body = ast.parse(path.read_text()).body
        code = [i for i, node in enumerate(body)
                if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
        if not code:
            continue
        late += [f"{path.name}:{node.lineno}" for node in body[code[0]:]
                 if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert late == []
