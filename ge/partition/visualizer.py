"""``PartitionVisualizer``: a picture of a graph with its nodes coloured by partition (seed 5.2).

    visualizer = partition.PartitionVisualizer()
    visualizer.draw_partitions(graph, partitions, output="partition_graph.png")

The format follows the extension (``.png``, ``.svg``, ``.html``); the picture is drawn
by ``ge.viz`` (GE's own layout and PNG writer: no plotting library is needed).
Partitions are read by duck typing: each has ``.index`` and ``.node_names`` (the
names of the graph's nodes it holds). Nodes in no partition are grey.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional, Union

from ge import viz
from ge.ir import Graph

__all__ = ["PartitionVisualizer"]


class PartitionVisualizer:
    """Draws a graph with each node coloured by the partition holding it."""

    def draw_partitions(self, graph: Any, partitions: Sequence[Any],
                        output: Union[str, Path] = "partition_graph.png",
                        title: Optional[str] = None) -> str:
        """Draw ``graph`` (a ``ge.Graph``, or the executable the partitions were cut from)
        to ``output`` with its nodes coloured by partition; return the path written."""
        parts = list(partitions)
        name = graph.name if isinstance(graph, Graph) else \
            getattr(getattr(graph, "graph", None), "name", "")
        heading = title if title is not None else \
            f"{name}: {len(parts)} partition{'s' if len(parts) != 1 else ''}"
        viz.draw(graph, output, color_by="partition", groups=viz.partition_groups(parts),
                 title=heading)
        return str(output)
