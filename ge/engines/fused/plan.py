"""Staging a lowered program: loops and NumPy calls, in order, and what passes between them.

Loop instructions run in generated loops over the output; each call runs as
one NumPy call over a whole array. A loop instruction goes into the earliest
loop stage after every call it depends on; a call runs after the stage that
computes its operands. Times make this exact: loop stage ``k`` runs at time
``2k + 1``, calls at even times, inputs and constants are there at time 0.

A loop value is *materialized* (written to an array the size of the output)
only when a call or a later stage reads it, or when it is the op's output; the
other loop values live only inside their stage's loop. (Recomputing a value in
each later stage that needs it instead would redo whole chains: a chain of k
transcendental steps would cost k^2 loop work.) A call on inputs alone (``tanh``
of a bias) runs on the input's own shape; a call on a materialized value runs at
the output's size, in place when nothing else reads its operand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from ge.engines.fused.lowering import Instruction, Program

__all__ = ["Stage", "Action", "Plan", "stage", "value_shapes"]


@dataclass
class Stage:
    """One generated loop: the instructions it computes, the arrays it reads (op inputs,
    call results, earlier stages' outputs) and the values it writes."""

    instructions: list[int] = field(default_factory=list)
    reads: list[int] = field(default_factory=list)
    writes: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Action:
    """One step of a run: a loop stage, or a call (``in_place``: into its operand's array)."""

    stage: Optional[Stage] = None
    call: Optional[int] = None
    in_place: bool = False


@dataclass
class Plan:
    """A program's actions in order, and which values they pass as arrays."""

    program: Program
    actions: list[Action]
    live: set[int]

    @property
    def stages(self) -> list[Stage]:
        """The loop stages, in order."""
        return [a.stage for a in self.actions if a.stage is not None]

    @property
    def calls(self) -> list[int]:
        """The call instructions, in order."""
        return [a.call for a in self.actions if a.call is not None]


def _live(program: Program) -> set[int]:
    live = {program.result}
    for index in range(program.result, -1, -1):
        if index in live:
            live.update(program.instructions[index].operands)
    return live


def _times(program: Program, live: set[int]) -> dict[int, int]:
    times: dict[int, int] = {}
    for index, instruction in enumerate(program.instructions):
        if index not in live:
            continue
        latest = max((times[o] for o in instruction.operands), default=0)
        if instruction.kind == "loop":
            times[index] = latest if latest % 2 else latest + 1
        elif instruction.kind == "call":
            times[index] = latest if latest % 2 == 0 else latest + 1
        else:
            times[index] = 0
    return times


def _readers(program: Program, live: set[int]) -> dict[int, list[int]]:
    readers: dict[int, list[int]] = {i: [] for i in live}
    for index in sorted(live):
        for operand in program.instructions[index].operands:
            readers[operand].append(index)
    return readers


def _materialized(program: Program, live: set[int], times: dict[int, int],
                  readers: dict[int, list[int]]) -> set[int]:
    """The loop values written to arrays: those a call or a later stage reads, and the
    op's output."""
    found = {program.result} if program.instructions[program.result].kind == "loop" else set()
    for index in live:
        if program.instructions[index].kind == "loop" and \
                any(times[reader] != times[index] for reader in readers[index]):
            found.add(index)
    return found


def _loop_stage(program: Program, roots: list[int], arrays: set[int]) -> Stage:
    """The stage computing ``roots``, reading ``arrays`` (and op inputs and call results)
    as arrays and recomputing every other loop value it needs."""
    loop = Stage(writes=list(roots))
    needed: set[int] = set()
    pending = list(roots)
    while pending:
        index = pending.pop()
        if index in needed:
            continue
        needed.add(index)
        for operand in program.instructions[index].operands:
            kind = program.instructions[operand].kind
            if kind == "loop" and operand not in arrays:
                pending.append(operand)
            elif kind != "constant" and operand not in loop.reads:
                loop.reads.append(operand)
    loop.instructions = sorted(needed)
    loop.reads.sort()
    return loop


def stage(program: Program) -> Plan:
    """The staged plan of ``program``."""
    live = _live(program)
    times = _times(program, live)
    readers = _readers(program, live)
    materialized = _materialized(program, live, times, readers)
    roots_at: dict[int, list[int]] = {}
    for index in sorted(materialized):
        roots_at.setdefault(times[index], []).append(index)
    calls_at: dict[int, list[int]] = {}
    for index in sorted(live):
        if program.instructions[index].kind == "call":
            calls_at.setdefault(times[index], []).append(index)
    actions: list[Action] = []
    earlier: set[int] = set()  # materialized values of earlier stages (arrays by then)
    for time in range(max(times.values(), default=0) + 1):
        if time % 2:
            roots = roots_at.get(time, [])
            if roots:
                actions.append(Action(stage=_loop_stage(program, roots, earlier)))
                earlier.update(roots)
            continue
        for index in calls_at.get(time, []):
            actions.append(Action(call=index, in_place=_in_place(program, index, readers)))
    return Plan(program, actions, live)


def _in_place(program: Program, index: int, readers: dict[int, list[int]]) -> bool:
    """A call may write into its operand's array: a temporary of the same dtype (a loop's
    output or another call's result, never an op input) that nothing else reads."""
    instruction: Instruction = program.instructions[index]
    if len(instruction.operands) != 1:
        return False
    operand = instruction.operands[0]
    source = program.instructions[operand]
    if source.kind not in ("loop", "call") or source.dtype != instruction.dtype:
        return False
    return readers[operand] == [index]


def value_shapes(plan: Plan, inputs: Union[Sequence[Sequence[Any]], Mapping[int, Sequence[Any]]],
                 output: tuple[Any, ...],
                 broadcast: Callable[..., Any]) -> dict[int, tuple[Any, ...]]:
    """The shape of every value a run passes as an array: op inputs as given (``inputs``,
    by op input position), constants 0-d, loop values the output's, and a call's the
    ``broadcast`` of its operands'."""
    shapes: dict[int, tuple[Any, ...]] = {}
    for index in sorted(plan.live):
        instruction = plan.program.instructions[index]
        if instruction.kind == "input":
            shapes[index] = tuple(inputs[instruction.index])
        elif instruction.kind == "constant":
            shapes[index] = ()
        elif instruction.kind == "loop":
            shapes[index] = output
        else:
            shapes[index] = tuple(broadcast(*(shapes[o] for o in instruction.operands)))
    return shapes
