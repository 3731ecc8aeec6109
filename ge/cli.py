"""The ``ge`` command.

    ge ops [--doc]              list the registry's ops
    ge info MODEL [--optimized] inputs, outputs (dynamic dims), op histogram, parameters, FLOPs;
                                --optimized: of the graph after the optimizer (--opt-level N)
    ge run MODEL [--check]      run on random inputs (or --inputs FILE.npz), summarise the
                                outputs; --check also runs onnxruntime and prints the max error;
                                --profile times each node (--top K), --trace FILE.json writes
                                a Chrome trace
    ge bench MODEL.onnx         GE against onnxruntime: alternating blocks, and each alone
    ge compile MODEL [--report] compile (--opt-level N, default 3; --verify checks every pass
                                numerically); --report prints what each pass did; -o FILE.gem
                                writes the offline model (ge run takes it, no recompiling),
                                -o FILE.json the optimized graph
    ge verify MODEL             compile with every pass verified on the reference interpreter;
                                says which pass broke the outputs, at which node, if any
    ge viz MODEL -o FILE        draw the graph before and after optimization (--before,
                                --after, --both) as .svg or .png, nodes coloured by
                                --color-by op|engine|stream; -o FILE.html writes the compile
                                report: both pictures, what each pass did, the memory plan

MODEL is an ONNX file (``.onnx``), a TensorFlow frozen graph (``.pb``) or SavedModel
directory, or a GE graph in its JSON form (``.json``); ``ge run`` and ``ge info`` also take
an offline model (``.gem``). ``--framework {onnx,tensorflow,ge}`` says which when the name
does not (as ATC's ``--framework``); ``--input-shape name:1,224,224,3`` (repeated, or
``;``-separated as ATC writes it) fixes the shape of a TensorFlow input the file leaves
unknown.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import numpy as np

import ge
from ge.errors import GEError, VerificationError
from ge.ir import Graph
from ge.ops import all_op_types, get_schema, node_cost
from ge.passes import LEVELS
from ge.passes.verify import DEFAULT_ATOL, DEFAULT_RTOL

#: the model formats ``--framework`` names (ATC's numbers for TensorFlow and ONNX too)
FRAMEWORKS = {"onnx": "onnx", "5": "onnx", "tensorflow": "tensorflow", "tf": "tensorflow",
              "3": "tensorflow", "ge": "ge"}


def framework_of(path: str) -> str:
    """The format a model's name says: ``onnx``, ``tensorflow`` (a ``.pb``, or a directory:
    a SavedModel) or ``ge`` (``.json``, ``.gem``)."""
    file = Path(path)
    if file.suffix == ".onnx":
        return "onnx"
    if file.suffix == ".pb" or file.is_dir():
        return "tensorflow"
    if file.suffix in (".json", ".gem"):
        return "ge"
    raise ge.errors.ModelFormatError(f"{path}: GE reads .onnx models, TensorFlow .pb graphs and "
                                     f"SavedModel directories, .json graphs and .gem offline "
                                     f"models (--framework says which a file is)")


def parse_input_shapes(specs: Optional[Sequence[str]]) -> dict[str, list[int]]:
    """``["x:1,224,224,3", "y:1,10;z:2"]`` -> ``{"x": [1, 224, 224, 3], "y": [1, 10],
    "z": [2]}`` (``-1`` or ``?`` for a size left dynamic)."""
    shapes: dict[str, list[int]] = {}
    for spec in specs or ():
        for part in filter(None, (p.strip() for p in spec.split(";"))):
            name, colon, sizes = part.rpartition(":")
            try:
                dims = [-1 if d.strip() in ("?", "-1") else int(d) for d in sizes.split(",")
                        if d.strip()]
            except ValueError:
                dims = []
            if not colon or not name or not dims:
                raise ge.errors.InputError(f"--input-shape {part!r}: expected NAME:D1,D2,... "
                                           f"(e.g. x:1,224,224,3)")
            shapes[name] = dims
    return shapes


def load_graph(path: str, framework: Optional[str] = None,
               input_shapes: Optional[dict[str, list[int]]] = None) -> Graph:
    """Read a model: ONNX (``.onnx``), TensorFlow (a frozen ``.pb`` or a SavedModel
    directory, with ``input_shapes`` for inputs it leaves unknown), GE's JSON form
    (``.json``), or the graph an offline model (``.gem``) holds (already optimized).
    ``framework`` (``onnx``, ``tensorflow``, ``ge``) overrides what the name says."""
    file = Path(path)
    kind = FRAMEWORKS[framework] if framework else framework_of(path)
    if input_shapes and kind != "tensorflow":
        raise ge.errors.InputError("--input-shape applies to TensorFlow models")
    if kind == "tensorflow":
        return ge.parse_tensorflow(file, input_shapes=input_shapes)
    if kind == "onnx":
        return ge.parse_onnx(file)
    if file.suffix == ".gem":
        return ge.load(file).graph
    return Graph.from_json(file.read_bytes())


def graph_info(graph: Graph) -> str:
    """The text ``ge info`` prints for a graph."""
    lines = [f"graph {graph.name}: {len(graph)} nodes"]
    lines += [f"  input  {v.name}: {v.desc}" for v in graph.inputs]
    lines += [f"  output {v.name}: {v.desc}" for v in graph.outputs]
    histogram = Counter(node.op_type for node in graph.nodes)
    lines.append("  ops: " + ", ".join(f"{op} x{n}" for op, n in histogram.most_common()))
    constants = [n.attrs["value"] for n in graph.nodes if n.op_type == "Const"]
    count = sum(int(t.numpy().size) for t in constants)
    size = sum(t.nbytes for t in constants)
    lines.append(f"  parameters: {count:,} values, {size:,} bytes")
    flops = sum(node_cost(n).flops for n in graph.nodes if n.op_type not in ("Data", "Const"))
    lines.append(f"  estimated FLOPs per run (unknown dims as 1): {flops:,}")
    return "\n".join(lines)


def random_feeds(graph: Graph, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random inputs for every graph input; unknown dimensions take ``batch``."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for value in graph.inputs:
        shape = [d if isinstance(d, int) and d >= 0 else batch for d in value.shape]
        dtype = value.dtype.np_dtype
        if dtype.kind == "f":
            feeds[value.producer.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[value.producer.name] = rng.random(shape) < 0.5
        else:
            feeds[value.producer.name] = rng.integers(0, 10, shape).astype(dtype)
    return feeds


def _cmd_ops(args: argparse.Namespace) -> None:
    for op_type in all_op_types():
        schema = get_schema(op_type)
        if args.doc:
            inputs = ", ".join(s.name + ("?" if s.optional else "") + ("..." if s.variadic else "")
                               for s in schema.inputs)
            print(f"{op_type}({inputs}): {schema.doc.splitlines()[0] if schema.doc else ''}")
        else:
            print(op_type)
    print(f"{len(all_op_types())} ops", file=sys.stderr)


def _cmd_info(args: argparse.Namespace) -> None:
    graph = load_graph(args.model, args.framework, parse_input_shapes(args.input_shape))
    if args.optimized:
        executable = ge.compile(graph, opt_level=args.opt_level)
        print(f"optimized at opt_level {args.opt_level}: {len(graph)} -> "
              f"{len(executable.graph)} nodes")
        _print_failures(executable.report)
        print(graph_info(executable.graph))
        print(executable.plan_text())
        return
    print(graph_info(graph))
    kind = FRAMEWORKS[args.framework] if args.framework else framework_of(args.model)
    if kind == "tensorflow" and Path(args.model).is_file():
        from ge.frontends.tensorflow import tensorflow_op_histogram

        histogram = tensorflow_op_histogram(args.model)
        print("  TensorFlow ops: " + ", ".join(f"{op} x{n}" for op, n in histogram.most_common()))
    elif args.model.endswith(".onnx"):
        from ge.frontends.onnx.reference import onnx_op_histogram

        histogram = onnx_op_histogram(args.model)
        print("  ONNX ops: " + ", ".join(f"{op} x{n}" for op, n in histogram.most_common()))


def _pass_failures(report: dict[str, Any]) -> list[dict[str, str]]:
    """Every failure the passes recorded (pass, node, error), in pass order."""
    return [failure for record in report.get("passes", [])
            for failure in record.get("failures", [])]


def _print_failures(report: dict[str, Any]) -> None:
    """One line per kernel or inference that raised inside a pass (the node was left)."""
    failures = _pass_failures(report)
    if failures:
        print(f"{len(failures)} pass failure(s) (those nodes were left as they were):")
    for failure in failures:
        print(f"  FAILED in {failure['pass']} on node {failure['node']!r}: {failure['error']}")


def _cmd_run(args: argparse.Namespace) -> None:
    if args.model.endswith(".gem"):
        started = time.perf_counter()
        executable = ge.load(args.model)
        print(f"loaded {args.model} in {(time.perf_counter() - started) * 1e3:.1f} ms "
              f"(compiled at opt_level {executable.report.get('opt_level')})")
        graph = executable.graph
    else:
        graph = load_graph(args.model, args.framework, parse_input_shapes(args.input_shape))
        executable = ge.compile(graph)
    if args.inputs:
        with np.load(args.inputs, allow_pickle=False) as archive:
            feeds = {name: archive[name] for name in archive.files}
    else:
        feeds = random_feeds(graph, args.batch)
    session = ge.Session(executable)
    started = time.perf_counter()
    outputs = session.run(feeds)
    print(f"ran in {(time.perf_counter() - started) * 1e3:.2f} ms")
    for name, array in outputs.items():
        summary = f"{name}: {array.dtype}{list(array.shape)}"
        if array.size and array.dtype.kind in "fiu":
            summary += (f" min {array.min():.6g} max {array.max():.6g} "
                        f"mean {array.astype(np.float64).mean():.6g}")
        print(summary)
    if args.check:
        _check_with_onnxruntime(args.model, feeds, outputs)
    if args.profile or args.trace:
        session.run(feeds, profile=True)  # the first run above planned the memory
        profile = session.last_profile
        assert profile is not None
        print(profile.table(args.top))
        from ge.engines.onednn import tuning

        if tuning.table():
            print(tuning.table())
        from ge.engines.fused import activation, gemv
        from ge.engines.onednn import winograd

        for table in (winograd.table(), gemv.table(), activation.table()):
            if table:
                print(table)
        if args.trace:
            profile.save(args.trace)
            print(f"wrote the Chrome trace to {args.trace} (open it in ui.perfetto.dev)")


def _check_with_onnxruntime(model: str, feeds: dict[str, np.ndarray],
                            outputs: dict[str, np.ndarray]) -> None:
    if not model.endswith(".onnx"):
        raise ge.errors.ModelFormatError("--check compares with onnxruntime: it needs an .onnx")
    from ge.frontends.onnx.reference import run_onnxruntime

    expected = run_onnxruntime(model, feeds)
    for name, array in outputs.items():
        want = expected[name]
        if array.dtype.kind in "fc":
            error = float(np.max(np.abs(array.astype(np.float64) - want), initial=0.0))
            scale = float(np.max(np.abs(want), initial=0.0))
            print(f"check {name}: max abs error {error:.3g} (output scale {scale:.3g}) "
                  f"vs onnxruntime")
        else:
            print(f"check {name}: {int(np.sum(array != want))} differing elements vs onnxruntime")


def _cmd_compile(args: argparse.Namespace) -> None:
    graph = load_graph(args.model, args.framework, parse_input_shapes(args.input_shape))
    executable = ge.compile(graph, opt_level=args.opt_level, verify=args.verify)
    if args.report:
        print(executable.report_text())
        print(executable.plan_text())
    else:
        report = executable.report
        print(f"compiled {graph.name!r} at opt_level {args.opt_level}: "
              f"{report['nodes_before']} -> {report['nodes']} nodes, {report['steps']} steps "
              f"in {report['compile_seconds'] * 1e3:.1f} ms")
        _print_failures(report)
    if args.verify:
        print(f"verified: every pass kept the outputs (rtol {DEFAULT_RTOL}, atol {DEFAULT_ATOL})")
    if args.output and args.output.endswith(".gem"):
        ge.save(executable, args.output)
        print(f"wrote the offline model to {args.output}")
    elif args.output:
        Path(args.output).write_text(executable.graph.to_json())
        print(f"wrote the optimized graph to {args.output}")


def _cmd_verify(args: argparse.Namespace) -> int:
    graph = load_graph(args.model)
    try:
        executable = ge.compile(graph, opt_level=args.opt_level, verify=True)
    except VerificationError as error:
        where = f" (first differing node: {error.node})" if error.node else ""
        print(f"FAILED: pass {error.pass_name} changed the outputs{where}")
        print(str(error))
        return 1
    passes = executable.report["passes"]
    print(f"OK: all {len(passes)} passes of opt_level {args.opt_level} keep the outputs of "
          f"{graph.name!r} (rtol {DEFAULT_RTOL}, atol {DEFAULT_ATOL}; "
          f"{executable.report['nodes_before']} -> {executable.report['nodes']} nodes)")
    for record in passes:
        if record["changed"]:
            print(f"  {record['pass']}: {record['nodes_before']}->{record['nodes_after']} verified")
    return 0


def _cmd_bench(args: argparse.Namespace) -> None:
    from ge import benchmark

    if not args.model.endswith(".onnx"):
        raise ge.errors.ModelFormatError("ge bench compares with onnxruntime: it needs an .onnx")
    info = benchmark.machine()
    peaks = benchmark.matmul_peaks()
    settings = ", ".join(f"{k}={v}" for k, v in info["blas_settings"].items()) or "defaults"
    engine = f"torch engine on PyTorch {info['torch']}" if info["torch"] else \
        "no PyTorch: no torch engine"
    engine += f", onednn engine on oneDNN {info['onednn']}" if info["onednn"] else \
        ", no oneDNN: no onednn engine"
    measured = ", ".join(f"{name} {rate:.0f}" for name, rate in peaks.items())
    print(f"{info['cpu']}, {info['cores']} cores, {info['blas']} ({settings}); float32 "
          f"matmul peak (GFLOP/s) {measured}; {engine}")
    peak = max(peaks.values())
    for batch in args.batch:
        feeds = benchmark.feeds_for(args.model, batch)
        specs = [benchmark.Spec(name, args.model, batch, opt_level=args.opt_level)
                 for name in ("ge", "onnxruntime")]
        result = benchmark.compare({s.contender: benchmark.runner(s, feeds) for s in specs},
                                   rounds=args.rounds, block_seconds=args.block_seconds)
        if not args.no_solo:
            for spec in specs:
                result.solo[spec.contender] = benchmark.solo(spec, args.rounds,
                                                             args.block_seconds)
        print(f"\nbatch {batch} ({args.rounds} rounds of alternating blocks; medians)")
        for row in benchmark.table(result, benchmark.estimated_flops(args.model, batch), peak):
            print(row)
        if any(result.flagged(name) for name in result.times):
            print(f"(!) the in-harness figure is over {benchmark.FLAG_OFF:.0%} off the "
                  f"figure alone: do not trust either until the cause is found")


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--framework", choices=sorted(FRAMEWORKS),
                        help="the model's format when its name does not say: onnx, tensorflow "
                             "(a .pb or SavedModel directory) or ge (.json, .gem); ATC's 3 "
                             "and 5 name TensorFlow and ONNX")
    parser.add_argument("--input-shape", action="append", metavar="NAME:D1,D2,...",
                        help="the shape of a TensorFlow input the model leaves unknown "
                             "(repeat it, or separate inputs with ';')")


def _memory_plan(executable: ge.Executable, batch: int) -> Any:
    """The executable's memory plan for the graph's own input shapes, or, when some are
    unknown, the one of a run on random inputs (unknown sizes ``batch``)."""
    if all(spec.desc.is_static for spec in executable.inputs):
        from ge.compiler.loader import static_plan

        return static_plan(executable)[1].memory
    with ge.Session(executable) as session:
        session.run(random_feeds(executable.graph, batch))
    return executable.last_plan[1].memory


def _cmd_viz(args: argparse.Namespace) -> None:
    from ge import viz

    suffix = Path(args.output).suffix.lower()
    if suffix not in viz.FORMATS:
        raise ge.errors.ModelFormatError(f"{args.output}: ge viz writes .svg, .png or .html")
    graph = load_graph(args.model, args.framework, parse_input_shapes(args.input_shape))
    executable = ge.compile(graph, opt_level=args.opt_level)
    if args.color_by == "partition":
        if suffix == ".html":
            raise ge.errors.ModelFormatError("ge viz --color-by partition draws .svg or .png")
        parts = ge.partition.CostPartitioner().create_partitions(
            executable, num_partitions=args.partitions)
        report = ge.partition.summarize(parts)
        title = (f"{graph.name} after optimization: {len(parts)} stages of balanced cost "
                 f"(balance {report.balance:.3f})")
        viz.draw(executable, args.output, color_by="partition",
                 groups=viz.partition_groups(parts), title=title)
        print(f"wrote {args.output}: {title}")
        return
    if suffix == ".html":
        viz.report_html(graph, executable, args.output, _memory_plan(executable, args.batch),
                        color_by=args.color_by or "engine")
        print(f"wrote the compile report of {graph.name!r} to {args.output}")
        return
    color_by = args.color_by or "op"
    # engines and streams of the graph as it is come from compiling it without passes
    before = graph if color_by == "op" else ge.compile(graph, opt_level=0)
    panels = {"before": (before, f"before optimization ({len(graph)} nodes)"),
              "after": (executable, f"after optimization at opt_level {args.opt_level} "
                                    f"({len(executable.graph)} nodes)")}
    chosen = [panels[args.which]] if args.which in panels else list(panels.values())
    viz.draw_side_by_side(chosen, args.output, color_by=color_by)
    print(f"wrote {args.output}: {' and '.join(title for _, title in chosen)}, "
          f"coloured by {color_by}")


def _add_level(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--opt-level", type=int, default=3, choices=sorted(LEVELS),
                        help="0 none, 1 basic, 2 extended (fusions), 3 all (layout); default 3")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``ge`` command."""
    parser = argparse.ArgumentParser(prog="ge", description="GE graph engine")
    commands = parser.add_subparsers(dest="command", required=True)
    ops = commands.add_parser("ops", help="list the registry's ops")
    ops.add_argument("--doc", action="store_true", help="show inputs and a line of doc")
    ops.set_defaults(handler=_cmd_ops)
    info = commands.add_parser("info", help="describe a graph")
    info.add_argument("model")
    _add_model_options(info)
    info.add_argument("--optimized", action="store_true",
                      help="describe the graph the optimizer makes of it")
    _add_level(info)
    info.set_defaults(handler=_cmd_info)
    run = commands.add_parser("run", help="run a graph on random or given inputs")
    run.add_argument("model")
    _add_model_options(run)
    run.add_argument("--inputs", help=".npz file of inputs")
    run.add_argument("--batch", type=int, default=1, help="size of unknown dimensions")
    run.add_argument("--check", action="store_true", help="compare with onnxruntime")
    run.add_argument("--profile", action="store_true",
                     help="time a second run node by node and print the slowest")
    run.add_argument("--top", type=int, default=15, help="rows of the --profile table")
    run.add_argument("--trace", help="write the profiled run as a Chrome trace (JSON)")
    run.set_defaults(handler=_cmd_run)
    bench = commands.add_parser("bench", help="time GE against onnxruntime on an ONNX model")
    bench.add_argument("model")
    bench.add_argument("--batch", type=int, nargs="+", default=[1],
                       help="sizes of unknown dimensions (default 1)")
    bench.add_argument("--rounds", type=int, default=5)
    bench.add_argument("--block-seconds", type=float, default=0.5)
    bench.add_argument("--no-solo", action="store_true",
                       help="skip timing each contender alone in a fresh process")
    _add_level(bench)
    bench.set_defaults(handler=_cmd_bench)
    compiling = commands.add_parser("compile", help="optimize and compile a graph")
    compiling.add_argument("model")
    _add_model_options(compiling)
    compiling.add_argument("--report", action="store_true", help="print what each pass did")
    compiling.add_argument("--verify", action="store_true",
                           help="check every pass on the reference interpreter")
    compiling.add_argument("-o", "--output", help="write the offline model (.gem) or the "
                           "optimized graph (.json)")
    _add_level(compiling)
    compiling.set_defaults(handler=_cmd_compile)
    verify = commands.add_parser("verify", help="find the pass, if any, that changes the outputs")
    verify.add_argument("model")
    _add_level(verify)
    verify.set_defaults(handler=_cmd_verify)
    drawing = commands.add_parser("viz", help="draw the graph before and after optimization, "
                                  "or write the compile report as HTML")
    drawing.add_argument("model")
    _add_model_options(drawing)
    drawing.add_argument("-o", "--output", required=True,
                         help="the picture (.svg, .png) or the report (.html) to write")
    drawing.add_argument("--color-by", choices=("op", "engine", "stream", "partition"),
                         help="what the node colours show (default: op; the report's "
                              "optimized graph: engine; partition: the optimized graph cut "
                              "into --partitions stages of balanced cost)")
    drawing.add_argument("--partitions", type=int, default=4,
                         help="stages for --color-by partition (default 4)")
    shown = drawing.add_mutually_exclusive_group()
    for which in ("before", "after", "both"):
        shown.add_argument(f"--{which}", dest="which", action="store_const", const=which,
                           help=f"draw the graph {which} optimization" if which != "both"
                           else "draw both, side by side (the default)")
    drawing.add_argument("--batch", type=int, default=1,
                         help="size of unknown dimensions when planning memory (.html)")
    _add_level(drawing)
    drawing.set_defaults(handler=_cmd_viz, which="both")
    args = parser.parse_args(argv)
    try:
        status = args.handler(args)
    except (GEError, OSError) as error:
        print(f"ge {args.command}: {error}", file=sys.stderr)
        return 1
    return int(status or 0)


if __name__ == "__main__":
    raise SystemExit(main())
