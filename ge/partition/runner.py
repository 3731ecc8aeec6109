"""Running partitions: each compiled on its own, run one after the other.

This module is the one place of ``ge.partition`` that uses the compiler and the
session (imported when a function here runs, so ``import ge.partition`` stays
light); the partitioners themselves only read graphs.

**Bit-exactness.** Fusions and the layout pass cannot cross a partition boundary,
so compiling the partitions of a raw graph at the default level gives results that
differ from the unpartitioned executable's in rounding. GE's partitions are exact
by construction instead: partition the graph the compiler already optimized (give a
partitioner ``ge.compile(graph)``, or ``partition.optimize(graph)``), and each
partition is compiled with ``opt_level=0`` and the original's engines (the options
it records, ``Partition.compiled_with``). Every node then runs the very kernel, on
the very inputs, that it runs in the unpartitioned executable, so ``run_partitions``
returns the unpartitioned session's outputs bit for bit. Partitions of a graph that
was not optimized are compiled with the options given (default: ``ge.compile``'s),
each optimized on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ge.errors import InputError
from ge.ir import Graph
from ge.partition.base import OPTIMIZED_KEY, Partition, PartitionError
from ge.partition.pipeline import Routing, route

__all__ = ["optimize", "compile_options_for", "compile_partition", "PartitionRunner",
           "run_partitions"]


def optimize(graph: Graph, **compile_options: Any) -> Graph:
    """The graph ``ge.compile(graph, **compile_options)`` runs (its passes applied),
    marked as optimized so that its partitions are compiled without optimizing again.
    ``graph`` itself is left as it was."""
    from ge.compiler import compile as compile_graph

    executable = compile_graph(graph, **compile_options)
    optimized = executable.graph
    optimized.metadata[OPTIMIZED_KEY] = {
        "opt_level": executable.options.get("opt_level"),
        "engines": executable.options.get("engines"),
        "threads": executable.options.get("threads")}
    return optimized


def compile_options_for(partition: Partition, **overrides: Any) -> dict[str, Any]:
    """The options ``partition`` is compiled with: ``opt_level=0`` and the original's
    engines when its graph was optimized already, then the partitioner's own
    (``Partition.options``), then ``overrides``."""
    options: dict[str, Any] = {}
    compiled = partition.compiled_with
    if compiled is not None:
        options["opt_level"] = 0
        for key in ("engines", "threads"):
            if compiled.get(key) is not None:
                options[key] = compiled[key]
    options.update(partition.options)
    options.update(overrides)
    return options


def compile_partition(partition: Partition, **compile_options: Any) -> Any:
    """``ge.compile`` of the partition's graph with ``compile_options_for``'s options."""
    from ge.compiler import compile as compile_graph

    return compile_graph(partition.graph, **compile_options_for(partition, **compile_options))


def check_feed(routing: Routing, feed: Mapping[str, Any]) -> None:
    """Raise ``InputError`` when ``feed`` lacks a value the partitions read."""
    if not isinstance(feed, Mapping):
        raise InputError(f"expected a dict of input name to array, got {type(feed).__name__}")
    missing = [name for name in routing.feeds if name not in feed]
    if missing:
        raise InputError(f"the feed lacks inputs {missing}; the partitions read "
                         f"{list(routing.feeds)}")


class PartitionRunner:
    """Partitions compiled once each, run one after the other on every ``run``."""

    def __init__(self, partitions: Sequence[Partition], **compile_options: Any) -> None:
        from ge.session import Session

        if not partitions:
            raise PartitionError("no partitions to run")
        self.partitions = list(partitions)
        self.routing = route(self.partitions)
        self.sessions = [Session(compile_partition(p, **compile_options))
                         for p in self.partitions]

    def run(self, feed: Mapping[str, Any]) -> dict[str, Any]:
        """The original graph's outputs for ``feed``, in its output order."""
        check_feed(self.routing, feed)
        values: dict[str, Any] = {name: feed[name] for name in self.routing.feeds}
        for position, carried in zip(self.routing.order, self.routing.carried):
            part = self.partitions[position]
            values.update(self.sessions[position].run({n: values[n] for n in part.inputs}))
            values = {name: values[name] for name in carried}
        return {name: values[name] for name in self.routing.graph_outputs}

    def close(self) -> None:
        """Release the sessions."""
        for session in self.sessions:
            session.finalize()
        self.sessions = []

    def __enter__(self) -> PartitionRunner:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def run_partitions(partitions: Sequence[Partition], feed: Mapping[str, Any],
                   **compile_options: Any) -> dict[str, Any]:
    """Compile each partition, run them in order on ``feed`` passing the boundary
    values, and return the original graph's outputs (see the module docstring for
    when they equal the unpartitioned session's bit for bit)."""
    with PartitionRunner(partitions, **compile_options) as runner:
        return runner.run(feed)
