"""``ge.distributed.Pipeline``: a partition pipeline run by a backend.

    plan = partition.PipelineScheduler().create_schedule(parts)
    with ge.distributed.Pipeline(plan, backend="threads") as pipeline:
        outputs = pipeline.run(feed)                  # one micro-batch
        many = pipeline.run_many(feeds)               # streamed through the stages

The pipeline is backend-neutral: it checks feeds, hands the backend the stages
(``StageSpec``: partition, compile options, what each stage hands on) and puts the
last stage's values in the original graph's output order. The backend (``threads``
or ``ray``; ``backends.py``) decides where stages run. Partitions of a
compiled graph give exactly the unpartitioned session's outputs
(``ge.partition.runner``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional, Union

from ge.distributed.backends import create_backend
from ge.distributed.base import (
    DEFAULT_QUEUE_SIZE,
    DEFAULT_TIMEOUT,
    Backend,
    BackendError,
    StageSpec,
    stage_specs,
)
from ge.errors import InputError
from ge.partition import ExecutionPlan, Partition, PipelineScheduler
from ge.partition.runner import check_feed

__all__ = ["Pipeline"]


class Pipeline:
    """Runs an ``ExecutionPlan`` (or a list of partitions, scheduled here) as a
    pipeline on ``backend``.

    ``queue_size``: micro-batches that may wait between two stages. ``timeout``:
    seconds without any micro-batch finishing before a run raises (bounded waits,
    never a hang). ``replicas``: copies of the pipeline for data parallelism,
    micro-batches dealt round-robin (the ``ray`` backend; ``threads`` runs one).
    ``backend_options``: the backend's own settings (``ray``: ``num_cpus``,
    ``actor_options``; see ``ge.distributed.ray_backend.RayBackend``).
    ``compile_options`` go to every stage's ``ge.compile``
    (``ge.partition.compile_options_for``).
    """

    def __init__(self, plan: Union[ExecutionPlan, Sequence[Partition]],
                 backend: str = "threads", *, queue_size: int = DEFAULT_QUEUE_SIZE,
                 timeout: float = DEFAULT_TIMEOUT, replicas: int = 1,
                 backend_options: Optional[Mapping[str, Any]] = None,
                 **compile_options: Any) -> None:
        if not isinstance(plan, ExecutionPlan):
            if not isinstance(plan, Sequence) or not all(isinstance(p, Partition) for p in plan):
                raise BackendError(f"Pipeline expects an ExecutionPlan or a list of "
                                   f"partitions, got {type(plan).__name__}")
            plan = PipelineScheduler().create_schedule(list(plan))
        self.plan = plan
        self.stages: list[StageSpec] = stage_specs(plan, compile_options)
        self._backend: Backend = create_backend(backend, self.stages, queue_size=queue_size,
                                                timeout=timeout, replicas=replicas,
                                                **dict(backend_options or {}))

    @property
    def backend(self) -> Backend:
        """The backend running the stages."""
        return self._backend

    @property
    def num_stages(self) -> int:
        """How many stages the pipeline has."""
        return len(self.stages)

    def run(self, feed: Mapping[str, Any]) -> dict[str, Any]:
        """The graph's outputs for one feed, in the graph's output order."""
        return self.run_many([feed])[0]

    def run_many(self, feeds: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The outputs for each feed (a micro-batch each), streamed through the
        stages so that stages work on different micro-batches at once."""
        if isinstance(feeds, Mapping) or not isinstance(feeds, Sequence):
            raise InputError(f"run_many expects a list of feeds, got {type(feeds).__name__}")
        for feed in feeds:
            check_feed(self.plan.routing, feed)
        fed = [{name: feed[name] for name in self.plan.feeds} for feed in feeds]
        finals = self._backend.run_many(fed)
        return [{name: final[name] for name in self.plan.graph_outputs} for final in finals]

    def close(self) -> None:
        """Stop the backend's workers and release the stages (idempotent)."""
        self._backend.close()

    @property
    def closed(self) -> bool:
        """True once ``close`` has run."""
        return self._backend.closed

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"Pipeline({self.num_stages} stages, backend {self._backend.name!r}, {state})"
