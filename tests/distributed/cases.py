"""What both pipeline backends are tested on: a two-stage graph whose second stage fails
for a feed of an index out of range, and the checks of that failure."""

from __future__ import annotations

import numpy as np
import pytest

import ge
from ge import distributed, partition
from ge.ops import create_node


def depth_parts(graph: ge.Graph, stages: int) -> list[partition.Partition]:
    partitioner = partition.DepthPartitioner()
    return partitioner.create_partitions(graph, partitioner.analyze_depth(graph),
                                         num_partitions=stages)


def gather_graph() -> ge.Graph:
    """y = Gather(Relu(x), indices): the second stage fails for an index out of range."""
    graph = ge.Graph("gather")
    x = create_node("Data", [], {"shape": [4]}, "x", graph)
    indices = create_node("Data", [], {"shape": [2], "dtype": ge.DataType.DT_INT64}, "indices",
                          graph)
    relu = create_node("Relu", [x], {}, "relu", graph)
    graph.set_outputs([create_node("Gather", [relu, indices], {}, "y", graph)])
    return graph


def gather_feed(index: int) -> dict[str, np.ndarray]:
    return {"x": np.arange(-1, 3, dtype=np.float32), "indices": np.array([0, index], np.int64)}


def assert_a_failing_stage_is_named_and_the_pipeline_goes_on(pipeline) -> None:
    """A gather pipeline: micro-batch 1's index is out of range, so stage 1 fails on it,
    the caller gets ``PipelineError`` naming both, and later runs still work."""
    assert pipeline.run(gather_feed(3))["y"].tolist() == [0.0, 2.0]
    with pytest.raises(distributed.PipelineError) as caught:
        pipeline.run_many([gather_feed(1), gather_feed(9), gather_feed(2)])
    error = caught.value
    assert error.stage == 1 and error.microbatch == 1
    assert "stage 1" in str(error) and "out of range" in str(error)
    assert isinstance(error.__cause__, ge.errors.ExecutionError)
    # a stage's error ends its micro-batch only: the pipeline goes on working
    assert pipeline.run(gather_feed(2))["y"].tolist() == [0.0, 1.0]
