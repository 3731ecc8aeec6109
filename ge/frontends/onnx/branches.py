"""An ``If`` whose branches give values of different ranks, made typeable by moving the
rest of the graph into both branches.

Every GE value has one rank; ONNX lets an ``If`` return a rank-2 tensor from one
branch and a rank-0 one from the other (a TorchScript ``if`` returning ``y.sum(0)``
or ``y * 2``). Whatever reads that output is then typed differently per branch. So
the parser rewrites the model: the nodes after such an ``If`` (its *continuation*)
are copied into each branch, after it, and the ``If`` returns the graph's outputs
instead. Each branch is then one consistently typed graph; only the graph outputs
must agree in rank across branches (where they do not, the model has no single
output type and GE refuses it, naming the node).

    x -> If(c){then: a (rank 2); else: b (rank 0)} -> y -> ReduceSum -> out
    x -> If(c){then: a -> ReduceSum -> out'; else: b -> ReduceSum -> out'} -> out

The parser asks for this when translating such an ``If`` fails
(``RankChangingIf``), and parses the rewritten model again; a continuation that
holds another such ``If`` is rewritten the same way inside the branch.
"""

from __future__ import annotations

import onnx
from onnx import helper

from ge.errors import ShapeError

__all__ = ["RankChangingIf", "sink_continuation", "name_every_node", "MAX_REWRITES"]

#: how many rank-changing ``If`` nodes one model may have (each doubles its continuation)
MAX_REWRITES = 6


class RankChangingIf(ShapeError):
    """An ``If`` (named ``node``) whose branches give an output two different ranks."""

    def __init__(self, message: str, node: str) -> None:
        super().__init__(message)
        self.node = node


def name_every_node(model: onnx.ModelProto) -> None:
    """Give every unnamed node of the model (subgraphs included) a unique name."""
    taken: set[str] = set()
    graphs = [model.graph]
    nodes: list[onnx.NodeProto] = []
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            nodes.append(node)
            taken.add(node.name)
            for attribute in node.attribute:
                graphs.extend([attribute.g] if attribute.HasField("g") else [])
                graphs.extend(attribute.graphs)
    count = 0
    for node in nodes:
        if not node.name:
            while f"node_{count}" in taken:
                count += 1
            node.name = f"node_{count}"
            taken.add(node.name)


def sink_continuation(model: onnx.ModelProto, node_name: str) -> bool:
    """Rewrite the graph holding the ``If`` called ``node_name`` (the first found, the
    main graph first, then-branches before else-branches); False if there is none."""
    found = _find(model.graph, node_name)
    if found is None or found[1] == len(found[0].node) - 1:
        return False  # nothing follows the If: its own outputs differ in rank
    graph, index = found
    _sink(graph, index)
    return True


def _find(graph: onnx.GraphProto, name: str) -> tuple[onnx.GraphProto, int] | None:
    for index, node in enumerate(graph.node):
        if node.name == name and node.op_type == "If":
            return graph, index
    for node in graph.node:
        for attribute in node.attribute:
            for inner in ([attribute.g] if attribute.HasField("g") else []) + \
                    list(attribute.graphs):
                found = _find(inner, name)
                if found is not None:
                    return found
    return None


def _sink(graph: onnx.GraphProto, index: int) -> None:
    nodes = list(graph.node)
    choice, rest = nodes[index], nodes[index + 1:]
    outputs = list(graph.output)
    branches = {attribute.name: attribute.g for attribute in choice.attribute}
    new_branches = {}
    for key in ("then_branch", "else_branch"):
        branch = branches[key]
        body = list(branch.node)
        for produced, wanted in zip(branch.output, choice.output):
            if wanted:  # the If's output names, now defined inside the branch
                body.append(helper.make_node("Identity", [produced.name], [wanted],
                                             name=f"{choice.name}/{key}/{wanted}"))
        body += [_copy(node) for node in rest]
        results = []
        for output in outputs:  # each branch returns the graph's outputs, renamed
            result = f"{output.name}@{choice.name}/{key}"
            body.append(helper.make_node("Identity", [output.name], [result],
                                         name=f"{choice.name}/{key}/{output.name}"))
            results.append(helper.make_tensor_value_info(
                result, output.type.tensor_type.elem_type, None))
        new_branches[key] = helper.make_graph(body, f"{branch.name or key}+continuation", [],
                                              results, list(branch.initializer))
    # a new name: the other copies of this node (in the other branch of an If rewritten
    # before) are still to be found by the old one
    sunk = helper.make_node("If", [choice.input[0]], [o.name for o in outputs],
                            name=f"{choice.name}+continuation",
                            then_branch=new_branches["then_branch"],
                            else_branch=new_branches["else_branch"])
    del graph.node[index:]
    graph.node.append(sunk)


def _copy(node: onnx.NodeProto) -> onnx.NodeProto:
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    return copy
