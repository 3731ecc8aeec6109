"""What every pipeline backend shares: the stage description, the backend interface,
and the errors.

A backend runs ``StageSpec`` records: each names its partition, the compile options
for it, and what it hands to the next stage. ``StageSpec.advance`` is one stage's
work on one micro-batch, whatever runs it (a thread here, a Ray actor in
``ray_backend``): read the partition's inputs from the values received, run the
partition, and pass on the values later stages and the graph's outputs still need.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from ge.errors import BackendError, PipelineError
from ge.partition import ExecutionPlan, Partition, compile_partition

__all__ = ["StageSpec", "FailedStage", "Backend", "PipelineError", "BackendError",
           "stage_specs", "outcome", "DEFAULT_TIMEOUT", "DEFAULT_QUEUE_SIZE"]

#: seconds a pipeline waits without any micro-batch finishing before it gives up
DEFAULT_TIMEOUT = 120.0
#: micro-batches that may wait between two stages
DEFAULT_QUEUE_SIZE = 2


@dataclass(frozen=True)
class StageSpec:
    """One stage of a pipeline: ``partition`` compiled with ``compile_options``,
    handing ``carried`` on to the next stage (after the last: the graph's outputs)."""

    index: int
    partition: Partition
    carried: tuple[str, ...]
    compile_options: Mapping[str, Any] = field(default_factory=dict)

    def compile(self) -> Any:
        """The stage's executable (``ge.compile`` of its partition)."""
        return compile_partition(self.partition, **self.compile_options)

    def advance(self, values: Mapping[str, Any],
                run: Callable[[dict[str, Any]], Mapping[str, Any]]) -> dict[str, Any]:
        """Run the stage on one micro-batch's ``values`` (``run``: the compiled
        partition's ``Session.run``) and return what it hands on."""
        made = run({name: values[name] for name in self.partition.inputs})
        return {name: made[name] if name in made else values[name] for name in self.carried}


def stage_specs(plan: ExecutionPlan, compile_options: Mapping[str, Any]) -> list[StageSpec]:
    """The stages of ``plan``, each to be compiled with ``compile_options``."""
    return [StageSpec(index, part, plan.carried[index], dict(compile_options))
            for index, part in enumerate(plan.stages)]


class Backend(abc.ABC):
    """Runs the stages of a pipeline somewhere (threads, Ray actors).

    A backend is made with the stages and its settings (``queue_size``: micro-batches
    that may wait between two stages; ``timeout``: seconds without progress before a
    run gives up; ``replicas``: copies of the whole pipeline for data parallelism,
    1 until a backend supports more). ``run_many`` streams micro-batches through and
    returns, per feed in order, the last stage's hand-on values; a failure raises
    ``PipelineError`` naming the stage. ``close`` stops every worker; a closed
    backend runs nothing more.
    """

    #: the name ``ge.distributed.Pipeline(backend=...)`` knows it by
    name = "?"

    def __init__(self, stages: Sequence[StageSpec], *, queue_size: int = DEFAULT_QUEUE_SIZE,
                 timeout: float = DEFAULT_TIMEOUT, replicas: int = 1) -> None:
        if isinstance(queue_size, bool) or not isinstance(queue_size, int) or queue_size < 1:
            raise BackendError(f"queue_size must be a positive integer, got {queue_size!r}")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise BackendError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
            raise BackendError(f"replicas must be a positive integer, got {replicas!r}")
        self.stages = list(stages)
        self.queue_size = queue_size
        self.timeout = float(timeout)
        self.replicas = replicas

    @abc.abstractmethod
    def run_many(self, feeds: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Stream ``feeds`` through the stages; per feed, what the last stage hands on."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop the workers and release the stages' sessions (idempotent)."""

    @property
    @abc.abstractmethod
    def closed(self) -> bool:
        """True once ``close`` has run."""


@dataclass(frozen=True)
class FailedStage:
    """What a failed stage hands on in place of its values: the stage and the error."""

    stage: int
    error: BaseException


def outcome(microbatch: int, payload: Any) -> dict[str, Any]:
    """A micro-batch's outputs, or its stage's failure raised as ``PipelineError``."""
    if isinstance(payload, FailedStage):
        raise PipelineError(failure_message(payload.stage, microbatch, payload.error),
                            stage=payload.stage, microbatch=microbatch) from payload.error
    return dict(payload)


def failure_message(stage: int, microbatch: Optional[int], error: BaseException) -> str:
    """``stage 2 failed on micro-batch 0: ExecutionError: ...``."""
    where = "" if microbatch is None else f" on micro-batch {microbatch}"
    return f"pipeline stage {stage} failed{where}: {type(error).__name__}: {error}"
