"""Batch slicing: a run of steps whose values outgrow the cache, run a few samples at a
time.

A convolution network's early layers at batch 8 write values of tens of megabytes
(MobileNetV2's first expansion: 38 MB), more than the last-level cache holds, so each
one goes out to memory and is read back by the next step. Where a run of consecutive
steps computes each sample of the batch on its own (convolutions, pooling, elementwise
ops: sample ``b`` of the output depends on sample ``b`` of the inputs only), the run can
go slice by slice instead: all its steps on samples 0-1, then all on 2-3, and so on.
The values made and read only inside the run (its *inner* values) then need one slice's
bytes, planned at that size, and they stay in the cache between the step that writes
them and the one that reads them. Measured on MobileNetV2 at batch 8 on a 2-core Zen 4
(32 MB of L3): 40.2 ms a run whole, 32.0 ms sliced.

Per input signature, ``plan_slices`` finds the runs: consecutive steps that are
separable by batch (``separable``), from the first that moves more than ``budget``
bytes (its inputs and outputs beside the constants) at the full batch to the last that
does, at least two such steps and at least one inner value; each run is cut in the
fewest slices that bring its largest step under the budget. The memory plan holds the
inner values at one slice's size, and the values that cross the run's border live over
the whole run (a later slice still reads the run's inputs, and an earlier slice wrote
its outputs). The runtime runs the slices (``ge.runtime.tasks.SliceGroup``).

The budget is half the last-level cache (the CPU's, read from the system), or
``GE_BATCH_SLICE_BYTES``; ``GE_BATCH_SLICE_BYTES=0`` turns slicing off, and so does
``gp.MemoryPass().enable_batch_slicing(False)``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ge.ir import Node
from ge.memory import slot_bytes
from ge.ops.registry import Trait, get_schema, op_has_trait
from ge.runtime.tasks import INNER, SLICED, WHOLE

__all__ = ["SLICED", "WHOLE", "INNER", "Separable", "Slicing", "separable", "plan_slices",
           "budget", "VARIABLE"]

#: the environment variable that sets the budget in bytes ("0": no slicing)
VARIABLE = "GE_BATCH_SLICE_BYTES"
#: the budget where the system names no last-level cache
DEFAULT_BUDGET = 16 << 20

# how a step's input or output is handed to it in a slice (the runtime's codes): cut
# along axis 0 of the whole value, whole (a filter, a broadcast operand), or the inner
# value's buffer

# ops whose input 0 (and the inputs named here) carry the batch on axis 0, and whose
# other inputs are constants read whole: each output sample depends on its input sample
_FIRST_INPUT = {"Conv2D": (), "FusedConv2D": ("residual",), "ConvBNReLU": (),
                "Conv3D": (), "ConvTranspose": (), "MaxPool": (), "AvgPool": (),
                "MaxPool3D": (), "AvgPool3D": (), "GlobalAveragePool": (),
                "GlobalMaxPool": (), "LpPool": (), "FusedBatchNorm": (), "BiasAdd": (),
                "InstanceNormalization": (), "LayerNormalization": (), "Softmax": (),
                "LogSoftmax": (), "Transpose": ()}


@dataclass(frozen=True)
class Separable:
    """How a step splits by batch: ``elementwise`` (an input is cut where it has the
    output's rank and the batch on axis 0, else read whole, as broadcasting reads it),
    or per input True (cut) / False (a constant, read whole)."""

    elementwise: bool
    cut: tuple[bool, ...] = ()


def separable(node: Node, constants: frozenset[str]) -> Optional[Separable]:
    """How ``node`` splits by batch, or None where a slice of its outputs may depend on
    other samples (or where GE does not know that it does not). ``constants``: the
    names of the values that are constants."""
    op = node.op_type
    if op_has_trait(op, Trait.VIEW) or not node.outputs:
        return None
    if op_has_trait(op, Trait.ELEMENTWISE):
        return Separable(True)
    if op in ("Softmax", "LogSoftmax", "LayerNormalization", "Concat"):
        rank = len(node.outputs[0].shape)
        axis = int(node.attrs.get("axis", -1 if op != "Concat" else 0))
        if rank == 0 or axis % rank == 0:
            return None
        if op == "Concat":
            return Separable(False, tuple(True for _ in node.inputs))
    if op == "Transpose":
        perm = node.attrs.get("perm")
        if not perm or int(perm[0]) != 0:
            return None
    if op == "FusedBatchNorm" and node.attrs.get("is_training"):
        return None
    if op not in _FIRST_INPUT and op != "Concat":
        return None
    schema = get_schema(op)
    cut = []
    for index, value in enumerate(node.inputs):
        batch = index == 0 or schema.input_name(index) in _FIRST_INPUT.get(op, ())
        if value is not None and not batch and value.name not in constants:
            return None  # a filter made at run time: GE does not take it apart
        cut.append(batch)
    return Separable(False, tuple(cut))


@functools.cache
def _last_level_cache() -> Optional[int]:
    """The largest cache of CPU 0 in bytes, from Linux's sysfs, or None."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    largest = None
    try:
        for entry in base.glob("index*"):
            text = (entry / "size").read_text().strip()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
            size = int(text.rstrip("KMGkmg")) * scale
            largest = size if largest is None else max(largest, size)
    except (OSError, ValueError):
        return None
    return largest


def budget() -> int:
    """The bytes a step of a sliced run may move: ``GE_BATCH_SLICE_BYTES``, else half
    the last-level cache (0: no slicing)."""
    given = os.environ.get(VARIABLE, "").strip()
    if given:
        try:
            return max(0, int(given))
        except ValueError:
            pass
    cache = _last_level_cache()
    return cache // 2 if cache else DEFAULT_BUDGET


@dataclass(frozen=True)
class Slicing:
    """One sliced run: steps ``first``..``last``, the batch, the slices as (start,
    stop) samples, per step how each input and output is handed over (``SLICED``,
    ``WHOLE``, ``INNER``), the inner slots, and the largest step's bytes at the full
    batch."""

    first: int
    last: int
    batch: int
    slices: tuple[tuple[int, int], ...]
    inputs: tuple[tuple[int, ...], ...]
    outputs: tuple[tuple[int, ...], ...]
    inner: frozenset[int]
    moved_bytes: int

    @property
    def width(self) -> int:
        """The most samples of one slice."""
        return max(stop - start for start, stop in self.slices)


def plan_slices(steps: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
                kinds: Sequence[Optional[Separable]],
                descs: Mapping[int, tuple[tuple[int, ...], np.dtype]],
                eligible: Sequence[bool], constants: frozenset[int], kept: frozenset[int],
                limit: int) -> list[Slicing]:
    """The sliced runs of one input signature.

    ``steps``: per step its input and output slots (-1: absent); ``kinds``: what
    ``separable`` said of its node; ``descs``: the slots' concrete shapes and dtypes;
    ``eligible``: the steps the runtime may run in slices (they write into planned
    buffers); ``constants``: constant slots; ``kept``: slots that must keep their whole
    size (graph inputs and outputs); ``limit``: the budget in bytes (0: none)."""
    if limit <= 0:
        return []
    readers: dict[int, list[int]] = {}
    for index, (ins, _outs) in enumerate(steps):
        for slot in ins:
            if slot >= 0:
                readers.setdefault(slot, []).append(index)

    def handed(index: int) -> Optional[tuple[int, tuple[int, ...], int]]:
        """(batch, per input SLICED or WHOLE, bytes moved) of a step that may be cut."""
        kind = kinds[index]
        ins, outs = steps[index]
        if kind is None or not eligible[index] or not outs:
            return None
        if any(slot not in descs for slot in outs) or any(
                slot >= 0 and slot not in descs for slot in ins):
            return None
        shape = descs[outs[0]][0]
        if not shape or shape[0] < 2:
            return None
        batch = shape[0]
        if any(not descs[slot][0] or descs[slot][0][0] != batch for slot in outs):
            return None
        how = []
        moved = sum(slot_bytes(descs[slot]) for slot in outs)
        for k, slot in enumerate(ins):
            if slot < 0:
                how.append(WHOLE)
                continue
            in_shape = descs[slot][0]
            if kind.elementwise:
                cut = len(in_shape) == len(shape) and in_shape[0] == batch
            else:
                cut = kind.cut[k] if k < len(kind.cut) else False
                if cut and (not in_shape or in_shape[0] != batch):
                    return None
            if cut and slot in constants:
                return None
            how.append(SLICED if cut else WHOLE)
            if slot not in constants:
                moved += slot_bytes(descs[slot])
        return batch, tuple(how), moved

    found: list[Slicing] = []
    index = 0
    while index < len(steps):
        # a run of separable steps of one batch, from its first step over the budget to
        # its last (the small steps between them too: cutting the run there would send
        # the values beside them out to memory)
        run: list[tuple[int, tuple[int, ...], int]] = []
        start = index
        while index < len(steps):
            got = handed(index)
            if got is None or (run and got[0] != run[0][0]):
                break
            run.append(got)
            index += 1
        if not run:
            index += 1
            continue
        big = [k for k, (_b, _h, moved) in enumerate(run) if moved > limit]
        if len(big) >= 2:
            found.extend(_cut(start + big[0], run[big[0]:big[-1] + 1], steps, readers,
                              constants, kept, limit))
    return found


def _cut(start: int, run: Sequence[tuple[int, tuple[int, ...], int]],
         steps: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
         readers: Mapping[int, list[int]], constants: frozenset[int], kept: frozenset[int],
         limit: int) -> list[Slicing]:
    last = start + len(run) - 1
    batch = run[0][0]
    produced = {slot for ins_outs in steps[start:last + 1] for slot in ins_outs[1]}
    whole = {slot for offset, (_b, how, _m) in enumerate(run)
             for slot, h in zip(steps[start + offset][0], how) if h == WHOLE}
    if whole & produced:  # a step reads whole what the run makes slice by slice
        return []
    inner = frozenset(slot for slot in produced if slot not in kept and slot not in constants
                      and all(start <= r <= last for r in readers.get(slot, ())))
    if not inner:
        return []
    largest = max(moved for _b, _h, moved in run)
    count = min(batch, -(-largest // limit))
    if count < 2:
        return []
    base, extra = divmod(batch, count)
    slices = []
    begin = 0
    for k in range(count):
        stop = begin + base + (1 if k < extra else 0)
        slices.append((begin, stop))
        begin = stop
    inputs = []
    outputs = []
    for offset, (_batch, how, _moved) in enumerate(run):
        ins, outs = steps[start + offset]
        inputs.append(tuple(INNER if slot in inner else h for slot, h in zip(ins, how)))
        outputs.append(tuple(INNER if slot in inner else SLICED for slot in outs))
    return [Slicing(start, last, batch, tuple(slices), tuple(inputs), tuple(outputs), inner,
                    largest)]
