"""``ge.distributed``: running partition pipelines (and, later, data-parallel replicas).

``Pipeline(plan, backend="threads")`` runs the stages of a
``ge.partition.ExecutionPlan`` each on a worker thread of its own, micro-batches
streaming through bounded queues. Backends are named (``known_backends()``); a Ray
backend, each stage on an actor, is to come in ``ray_backend.py``.
"""

from ge.distributed.backends import create_backend, known_backends
from ge.distributed.base import (
    DEFAULT_QUEUE_SIZE,
    DEFAULT_TIMEOUT,
    Backend,
    BackendError,
    PipelineError,
    StageSpec,
    stage_specs,
)
from ge.distributed.pipeline import Pipeline

__all__ = ["Backend", "BackendError", "DEFAULT_QUEUE_SIZE", "DEFAULT_TIMEOUT", "Pipeline",
           "PipelineError", "StageSpec", "create_backend", "known_backends", "stage_specs"]
