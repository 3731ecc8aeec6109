"""What a partitioning looks like in figures: stage costs, balance, memory, boundaries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ge.partition.base import Partition

__all__ = ["PartitionReport", "summarize"]


@dataclass(frozen=True)
class PartitionReport:
    """Per partition its estimated cost (seconds), planned memory and boundary bytes,
    and the balance of the costs: the largest over the mean (1.0 is perfect; a
    pipeline of these stages runs at the pace of the largest)."""

    stage_costs: tuple[float, ...]
    stage_memory: tuple[int, ...]
    stage_nodes: tuple[int, ...]
    input_bytes: tuple[int, ...]

    @property
    def total_cost(self) -> float:
        """The estimated seconds of all partitions together."""
        return sum(self.stage_costs)

    @property
    def max_cost(self) -> float:
        """The most expensive partition's estimated seconds."""
        return max(self.stage_costs, default=0.0)

    @property
    def mean_cost(self) -> float:
        """The mean estimated seconds of a partition."""
        return self.total_cost / len(self.stage_costs) if self.stage_costs else 0.0

    @property
    def balance(self) -> float:
        """``max_cost / mean_cost`` (1.0 for no partitions or no cost)."""
        return self.max_cost / self.mean_cost if self.mean_cost > 0 else 1.0

    def __str__(self) -> str:
        lines = [f"{len(self.stage_costs)} partitions, estimated {self.total_cost * 1e3:.3f} ms "
                 f"in all, balance (max / mean) {self.balance:.3f}",
                 f"{'part':>4} {'nodes':>6} {'cost ms':>9} {'share':>6} {'memory MiB':>11} "
                 f"{'inputs MiB':>11}"]
        for index, (cost, memory, nodes, inputs) in enumerate(zip(
                self.stage_costs, self.stage_memory, self.stage_nodes, self.input_bytes)):
            share = cost / self.total_cost if self.total_cost else 0.0
            lines.append(f"{index:>4} {nodes:>6} {cost * 1e3:>9.3f} {share:>6.1%} "
                         f"{memory / (1 << 20):>11.2f} {inputs / (1 << 20):>11.2f}")
        return "\n".join(lines)


def summarize(partitions: Sequence[Partition]) -> PartitionReport:
    """The figures of ``partitions`` (unknown costs and memory count as 0)."""
    return PartitionReport(
        tuple(p.cost or 0.0 for p in partitions),
        tuple(p.memory or 0 for p in partitions),
        tuple(len(p.node_names) for p in partitions),
        tuple(p.memory_detail.input_bytes if p.memory_detail else 0 for p in partitions))
