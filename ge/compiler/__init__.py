"""The compiler: ``compile(graph) -> Executable``."""

from ge.compiler.compile import DEFAULT_ENGINES, compile
from ge.compiler.executable import Executable, IOSpec, Step

__all__ = ["DEFAULT_ENGINES", "Executable", "IOSpec", "Step", "compile"]
