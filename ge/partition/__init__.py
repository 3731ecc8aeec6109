"""``ge.partition``: splitting a graph into parts, and pipelines of the parts (seed 5.2).

    from ge import partition

    executable = ge.compile(graph)                        # partition what the compiler runs
    partitioner = partition.CostPartitioner()
    parts = partitioner.create_partitions(executable, num_partitions=4)
    print(partitioner.report)                             # stage costs, balance
    outputs = partition.run_partitions(parts, feed)       # == ge.Session(executable).run(feed)

    scheduler = partition.PipelineScheduler()
    plan = scheduler.create_schedule(parts, scheduler.analyze_dependencies(parts))
    print(plan.num_stages, plan.describe())

Partitioners: ``DepthPartitioner`` (ranges of depth levels), ``MemoryPartitioner``
(each part within a memory limit), ``CostPartitioner`` (balanced estimated time),
``EnginePartitioner`` (runs of nodes on one engine). Each returns ``Partition``
records (``base``); every partitioner accepts a ``ge.Graph`` or a compiled
executable, whose optimized graph it splits (``runner`` says why that makes runs
bit-exact). ``PartitionVisualizer`` draws partitions.
"""

from ge.partition.base import OPTIMIZED_KEY, MemoryLimitError, Partition, PartitionError
from ge.partition.by_cost import CostPartitioner
from ge.partition.by_depth import DepthPartitioner
from ge.partition.by_engine import EnginePartitioner
from ge.partition.by_memory import DEFAULT_MEMORY_LIMIT, MemoryPartitioner
from ge.partition.estimate import NodeMemory, SegmentMemory, node_time
from ge.partition.pipeline import (
    Dependencies,
    Dependency,
    ExecutionPlan,
    PipelineScheduler,
    Routing,
    route,
)
from ge.partition.report import PartitionReport, summarize
from ge.partition.runner import (
    PartitionRunner,
    compile_options_for,
    compile_partition,
    optimize,
    run_partitions,
)
from ge.partition.visualizer import PartitionVisualizer

__all__ = [
    "CostPartitioner", "DEFAULT_MEMORY_LIMIT", "Dependencies", "Dependency", "DepthPartitioner",
    "EnginePartitioner", "ExecutionPlan", "MemoryLimitError", "MemoryPartitioner",
    "NodeMemory", "OPTIMIZED_KEY", "Partition", "PartitionError", "PartitionReport",
    "PartitionRunner", "PartitionVisualizer", "PipelineScheduler", "Routing", "SegmentMemory",
    "compile_options_for", "compile_partition", "node_time", "optimize", "route",
    "run_partitions", "summarize",
]

