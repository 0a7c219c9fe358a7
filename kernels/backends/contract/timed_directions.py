"""Which directions a backend times for a kernel, and how it counts an RNN's FLOPs: what
`deepbench check` holds a result to (a convolution that kept only its `fwd` part reads 20x
faster than one that times all three).

Every operation's class lists its directions (`Kernel.DIRECTIONS`): a result must hold each of
them exactly once, except where its backend's code times fewer, as written here beside the
backends (each entry names the code it follows)."""

from __future__ import annotations

from typing import Final

from ...kernel import Kernel
from ...precision import Precision
from .declaration import PartInfo, info_of

FWD: Final = "fwd"
# distributed/common.py: a collective times its in-place call, and the out-of-place one beside it.
COLLECTIVE_REQUIRED: Final = ("in_place",)
COLLECTIVE_ALLOWED: Final = ("in_place", "out_of_place")
# onnxruntime/*.py and tflite/*.py: inference engines, every kernel is forward only.
FORWARD_ONLY_BACKENDS: Final = frozenset({"onnxruntime", "tflite"})
# cudnn/graphs.py PRECISION_DIRECTIONS: cuDNN's int8 convolution has no backward.
FORWARD_ONLY_PRECISIONS: Final = {"conv": frozenset({"int8"})}
# Kernel.forward_only (catalog.py: ConvKernel): an inference set's convolution times its forward pass
# only, as DeepBench's inference did; the cuDNN and PyTorch backends say so in the result's info.
INFERENCE_FORWARD_ONLY: Final = (
    "not timed: DeepBench's inference timed the forward pass only (conv_bench.cu: `if (!inference)`)"
)
# pytorch/rnn_cudnn.py: on a GPU, an inference set's RNN runs its forward in inference mode only
# (pytorch/rnn.py on a CPU times both): the backward is optional there.
FORWARD_ONLY_SETS: Final = {"rnn": ("inference",)}
# pytorch/rnn_cudnn.py, onnxruntime/rnn.py, tflite/rnn.py: these libraries cannot leave the input
# projection out, so its FLOPs are counted (costs.rnn_flops(input_projection=True)); PyTorch's own
# recurrence on a CPU (pytorch/rnn.py) leaves it out, as DeepBench did.
INPUT_PROJECTION_BACKENDS: Final = frozenset({"onnxruntime", "tflite"})
INPUT_PROJECTION_DEVICES: Final = ("cuda",)  # the torch backend on a GPU: cuDNN's layers


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
    """(directions a result must hold, directions it may hold). `info`: the result's own, for an
    inference set's convolution: one that says it timed the forward pass alone (every result since
    inference went forward only) may hold nothing else; one that does not (written before, when the
    backward passes were timed too) must hold the forward pass and may hold the backward ones."""
    if kernel.op == "all_reduce":
        return frozenset(COLLECTIVE_REQUIRED), COLLECTIVE_ALLOWED
    allowed = tuple(kernel.DIRECTIONS)
    forward_only = backend in FORWARD_ONLY_BACKENDS or precision in FORWARD_ONLY_PRECISIONS.get(kernel.op, ())
    if forward_only or (kernel.forward_only and states_forward_only(info or {})):
        return frozenset({FWD}), (FWD,)
    if kernel.forward_only:
        return frozenset({FWD}), allowed
    if any(kernel.set.startswith(s) for s in FORWARD_ONLY_SETS.get(kernel.op, ())) and device.startswith("cuda"):
        return frozenset({FWD}), allowed
    return frozenset(allowed), allowed


def counts_input_projection(backend: str, device: str) -> bool:
    """Whether an RNN result of `backend` on `device` counts the input projection's FLOPs."""
    return backend in INPUT_PROJECTION_BACKENDS or (backend == "torch" and device.startswith(INPUT_PROJECTION_DEVICES))


def counted_costs(
    kernel: Kernel, precision: Precision, direction: str, backend: str, device: str
) -> list[tuple[float, float]]:
    """(FLOPs, fewest bytes) the tool's own formulas give one direction of `kernel` as `backend`
    counts it on `device` (an RNN with or without its input projection; a collective moves bytes
    and counts no FLOPs); `deepbench check` compares a result's figures with these."""
    nbytes = kernel.min_bytes(direction, precision)
    if kernel.op == "all_reduce":
        return [(0.0, nbytes)]
    if kernel.op == "rnn":
        return [
            (
                kernel.flops(direction, input_projection=counts_input_projection(backend, device)),  # type: ignore[call-arg]
                nbytes,
            )
        ]
    return [(kernel.flops(direction), nbytes)]
