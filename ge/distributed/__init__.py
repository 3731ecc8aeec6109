"""``ge.distributed``: running partition pipelines, and data-parallel replicas of them.

``Pipeline(plan, backend="threads")`` runs the stages of a
``ge.partition.ExecutionPlan`` each on a worker thread of its own, micro-batches
streaming through bounded queues; ``backend="ray"`` runs each stage on a Ray actor
(``ray_backend.py``), tensors passing between actors through Ray's object store, with
``replicas=N`` copies of the stage chain. Backends are named (``known_backends()``).
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
