"""Which directions a backend times for a kernel, and how it counts an RNN's FLOPs: what
`deepbench check` holds a result to (a convolution that kept only its `fwd` part reads 20x
faster than one that times all three).

Every operation's class lists its directions (`Kernel.DIRECTIONS`): a result must hold each of
them exactly once, except where its backend declares that it times fewer (its declaration.py:
`forward_only`, `forward_only_precisions`, `optional_backward`; `counts_input_projection`)."""

from __future__ import annotations

from typing import Final

from ...kernel import Kernel
from ...precision import Precision
from .. import declaration_of
from .declaration import PartInfo, info_of

FWD: Final = "fwd"
# collectives/common.py: a collective times its in-place call, and the out-of-place one beside it.
COLLECTIVE_REQUIRED: Final = ("in_place",)
COLLECTIVE_ALLOWED: Final = ("in_place", "out_of_place")
# Kernel.forward_only (catalog.py: ConvKernel): an inference set's convolution times its forward pass
# only, as DeepBench's inference did; the cuDNN and PyTorch backends say so in the result's info.
INFERENCE_FORWARD_ONLY: Final = (
    "not timed: DeepBench's inference timed the forward pass only (conv_bench.cu: `if (!inference)`)"
)


class ForwardOnlyInfo(PartInfo):
    """What a forward-only result says of its directions (its info): those timed, and why the
    backward passes are not."""

    directions: tuple[str, ...]
    backward: str = ""


def states_forward_only(info: dict) -> bool:
    """Whether a result's info says it timed the forward pass alone."""
    stated = info_of(ForwardOnlyInfo, info)
    return stated is not None and stated.directions == (FWD,)


def timed_directions(
    kernel: Kernel, precision: str, backend: str, device: str, info: dict | None = None
) -> tuple[frozenset[str], tuple[str, ...]]:
    """(directions a result must hold, directions it may hold), as the result's backend declares
    them (`forward_only`, `forward_only_precisions`, `optional_backward`). `info`: the result's own,
    for an inference set's convolution: one that says it timed the forward pass alone (every result
    since inference went forward only) may hold nothing else; one that does not (written before, when
    the backward passes were timed too) must hold the forward pass and may hold the backward ones."""
    if kernel.op == "all_reduce":
        return frozenset(COLLECTIVE_REQUIRED), COLLECTIVE_ALLOWED
    declared = declaration_of(backend)
    allowed = tuple(kernel.DIRECTIONS)
    forward_only = declared.forward_only or precision in declared.forward_only_precisions.get(kernel.op, ())
    if forward_only or (kernel.forward_only and states_forward_only(info or {})):
        return frozenset({FWD}), (FWD,)
    if kernel.forward_only or declared.optional_backward(kernel, device):
        return frozenset({FWD}), allowed
    return frozenset(allowed), allowed


def counted_costs(
    kernel: Kernel, precision: Precision, direction: str, backend: str, device: str
) -> list[tuple[float, float]]:
    """(FLOPs, fewest bytes) the tool's own formulas give one direction of `kernel` as `backend`
    counts it on `device` (an RNN with or without its input projection, as the backend declares; a
    collective moves bytes and counts no FLOPs); `deepbench check` compares a result's figures with
    these."""
    nbytes = kernel.min_bytes(direction, precision)
    if kernel.op == "all_reduce":
        return [(0.0, nbytes)]
    if kernel.op == "rnn":
        projection = declaration_of(backend).counts_input_projection(device)
        return [(kernel.flops(direction, input_projection=projection), nbytes)]  # type: ignore[call-arg]
    return [(kernel.flops(direction), nbytes)]
