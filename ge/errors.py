"""Exception types raised by GE.

Every failure GE reports is one of these classes. Each message names the node,
input or buffer concerned and says what was expected, so that a user can fix a
model or a feed without reading GE's source. Where a standard exception has the
same meaning, the class also derives from it (a ``ShapeError`` is a
``ValueError``), so generic ``except`` clauses keep working.
"""

from __future__ import annotations

import builtins

__all__ = [
    "GEError",
    "GraphError",
    "ShapeError",
    "DTypeError",
    "AttrError",
    "OpArgumentError",
    "UnsupportedOpError",
    "ModelFormatError",
    "CompileError",
    "VerificationError",
    "InputError",
    "ExecutionError",
    "GERuntimeError",
    "DeviceMemoryError",
    "InvalidPointerError",
    "DoubleFreeError",
    "OutOfBoundsError",
    "OutOfMemoryError",
    "NotInitializedError",
    "PartitionError",
    "MemoryLimitError",
    "PipelineError",
    "BackendError",
]


class GEError(Exception):
    """Base class of every error GE raises."""


class GraphError(GEError, builtins.ValueError):
    """The graph is malformed: a cycle, a dangling input, a duplicate name, no outputs."""


class ShapeError(GraphError):
    """An op's input shapes or attributes do not fit together."""


class DTypeError(ShapeError, builtins.TypeError):
    """An op's input dtypes do not fit its definition."""


class OpArgumentError(GraphError, builtins.KeyError):
    """An unknown or missing input or attribute name was given to an op."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class AttrError(ShapeError):
    """An attribute has a value of the wrong type or outside its allowed range."""


class UnsupportedOpError(GEError, builtins.NotImplementedError):
    """An op type is not known to the registry, or an engine cannot run it."""


class ModelFormatError(GEError, builtins.ValueError):
    """A model file or serialized graph is malformed or truncated."""


class CompileError(GEError):
    """Compilation of a graph failed."""


class VerificationError(CompileError):
    """A pass changed what the graph computes; the message names the pass and the node."""

    def __init__(self, message: str, pass_name: str = "", node: str = "") -> None:
        super().__init__(message)
        self.pass_name = pass_name
        self.node = node


class InputError(GEError, builtins.ValueError):
    """A feed given to a session does not match the graph's inputs."""


class ExecutionError(GEError, builtins.RuntimeError):
    """A kernel failed while a session ran; the message names the node."""


class GERuntimeError(GEError, builtins.RuntimeError):
    """A failure of the runtime: devices, memory, streams, events."""


class NotInitializedError(GERuntimeError):
    """The runtime was used before ``acl.init()`` / ``set_device``."""


class DeviceMemoryError(GERuntimeError):
    """A device-memory operation was refused."""


class InvalidPointerError(DeviceMemoryError):
    """A pointer does not point into a live allocation."""


class DoubleFreeError(InvalidPointerError):
    """A pointer was freed twice."""


class OutOfBoundsError(DeviceMemoryError):
    """A copy would read or write past the end of a buffer."""


class OutOfMemoryError(DeviceMemoryError, builtins.MemoryError):
    """The device heap cannot satisfy an allocation."""


class PartitionError(GEError, builtins.ValueError):
    """A graph cannot be partitioned as asked (a bad count, groups out of order,
    partitions that do not fit together)."""


class MemoryLimitError(PartitionError):
    """A single node needs more memory than the partition limit allows; ``node``,
    ``nbytes`` and ``limit`` say which, how much, and the limit."""

    def __init__(self, message: str, node: str = "", nbytes: int = 0, limit: int = 0) -> None:
        super().__init__(message)
        self.node = node
        self.nbytes = nbytes
        self.limit = limit


class PipelineError(ExecutionError):
    """A pipeline stage failed (or stopped answering); ``stage`` is its index (-1 when
    no stage is to blame) and ``microbatch`` the position of the feed in the call."""

    def __init__(self, message: str, stage: int = -1, microbatch: int = -1) -> None:
        super().__init__(message)
        self.stage = stage
        self.microbatch = microbatch


class BackendError(GEError, builtins.ValueError):
    """A pipeline backend that is unknown, not available, or asked for what it
    cannot do."""


# The names the issue texts and the ACL facade use.
RuntimeError = GERuntimeError  # noqa: A001 - deliberate: ``ge.errors.RuntimeError``
