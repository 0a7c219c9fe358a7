"""What the oneDNN backend declares (backends/contract/declaration.py), importable without oneDNN: its
options (how a convolution's algorithm and implementation are chosen, implementations pinned), their
CLI group, the typed facts each part records, the pins `verify` re-runs from that record, the
precisions it covers with oneDNN's own data types, and what its results are held to (int8
convolutions forward only; recurrent layers that count their input projection)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field

from ...precision import Precision
from ...results import KernelResult, Status
from ..contract.declaration import BackendDeclaration, BackendOptions, PartInfo, add_choice, info_of

# How a convolution's implementation is chosen (--onednn-algorithm's choices): raced over every
# algorithm's implementations (race.py), or one algorithm's first implementation, as DeepBench's
# std_conv_bench.cpp took convolution_direct's.
Algorithm = Literal["race", "direct", "winograd", "auto"]
PIN_ALL = "*"
PIN_SEPARATOR = ":"  # 'ALGORITHM:IMPLEMENTATION', e.g. 'convolution_direct:brgconv:avx512_core_amx'


@dataclass(frozen=True)
class Types:
    """oneDNN's data types (dnnl_data_type_t names) of a precision's operands."""

    source: str
    weights: str
    destination: str


# The precisions it runs, with oneDNN's types: activations, weights, and the direction's result (int8:
# unsigned activations, signed weights and the int32 accumulator, as DeepBench's u8s8 inference).
PRECISIONS = {
    Precision.FP32: Types("f32", "f32", "f32"),
    Precision.BF16: Types("bf16", "bf16", "bf16"),
    Precision.FP16: Types("f16", "f16", "f16"),
    Precision.INT8: Types("u8", "s8", "s32"),
}
INSTALL_HINT = "pip install 'deepbench[intel]'"


class OnednnOptions(BackendOptions):
    algorithm: Algorithm = Field(
        "race",
        description="convolutions: race every implementation oneDNN offers for convolution_direct, "
        "convolution_winograd and convolution_auto and keep the fastest correct one (race), or take the "
        "first implementation of one algorithm (direct: DeepBench's convolution_direct; winograd; auto)",
    )
    implementations: dict[str, str] = Field(
        default_factory=dict,
        description="oneDNN implementations pinned instead of chosen: '<item id>/<direction>' (or '*') -> "
        "'ALGORITHM:IMPLEMENTATION' as results record it in info.onednn.pin, e.g. "
        "'convolution_direct:brgconv:avx512_core_amx' (verify re-runs the recorded ones)",
    )


class OnednnPart(PartInfo):
    """What oneDNN ran a direction with (its record under `onednn`)."""

    implementation: str  # oneDNN's name (impl_info_str)
    algorithm: str = ""
    pin: str = ""  # 'ALGORITHM:IMPLEMENTATION' (convolutions)
    chosen_by: str = ""
    formats: dict[str, str] = Field(default_factory=dict)  # argument -> the memory format the primitive chose
    isa: str = ""  # dnnl_get_effective_cpu_isa
    runtime: str = ""  # dnnl_version().cpu_runtime
    threading: str = ""
    threads: int = 0
    candidates: list[dict[str, Any]] = Field(default_factory=list)
    padding: str = ""  # DeepBench's padding as applied (convolutions: none, as its Intel benchmark)


class OnednnPartInfo(PartInfo):
    """A part oneDNN ran: the library, its primitive, and its record."""

    library: str = ""
    primitive: str = ""
    onednn: OnednnPart


def implementation_pin(value: str) -> tuple[str, str]:
    """One --onednn-impl value -> ('<item id>/<direction>' or '*', 'ALGORITHM:IMPLEMENTATION')."""
    head, eq, rest = value.partition("=")
    key, spec = (head, rest) if eq and "/" in head else (PIN_ALL, value)
    algorithm, sep, impl = spec.strip().partition(PIN_SEPARATOR)
    if not sep or not algorithm or not impl:
        raise argparse.ArgumentTypeError(
            f"malformed oneDNN implementation '{spec}' (expected ALGORITHM:IMPLEMENTATION as results record it in "
            "info.onednn.pin, e.g. convolution_direct:brgconv:avx512_core_amx)"
        )
    return key.strip(), spec.strip()


def pin_for(pins: Mapping[str, str], item_id: str, direction: str) -> str | None:
    """The implementation pinned for this item's direction: '<item id>/<direction>', else '*'."""
    return pins.get(f"{item_id}/{direction}") or pins.get(PIN_ALL)


class OnednnDeclaration(BackendDeclaration[OnednnOptions]):
    part_info = OnednnPartInfo
    precisions = PRECISIONS
    libraries = ("oneDNN",)
    install_hint = INSTALL_HINT
    # conv.py: oneDNN's int8 convolution is an inference primitive (forward_inference), as DeepBench's
    # int8 ran: no backward passes.
    forward_only_precisions: ClassVar[Mapping[str, frozenset[str]]] = {"conv": frozenset({Precision.INT8.value})}

    def counts_input_projection(self, device: str) -> bool:
        """oneDNN's RNN primitives take the layer's input and compute W x_t for every step inside the
        call (rnn.py), forward and backward: the time includes it and the FLOPs count it."""
        return True

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        add_choice(
            group,
            "--onednn-algorithm",
            OnednnOptions,
            "algorithm",
            "CPU (oneDNN): how a convolution's implementation is chosen: race (default) times every "
            "implementation oneDNN offers for convolution_direct, convolution_winograd and convolution_auto "
            "and keeps the fastest correct one; direct takes convolution_direct's first implementation, as "
            "DeepBench's std_conv_bench.cpp did; winograd and auto take those algorithms' first",
        )
        group.add_argument(
            "--onednn-impl",
            action="append",
            type=implementation_pin,
            metavar="[ID/DIR=]ALGORITHM:IMPL",
            help="CPU (oneDNN): run this convolution implementation instead of choosing one, as results "
            "record it in info.onednn.pin (e.g. convolution_direct:brgconv:avx512_core_amx); for one "
            "direction of one kernel with 'conv/train/003/fp32/bwd_data=...' (repeatable), else for every "
            "convolution",
        )

    def options_from(self, args: argparse.Namespace) -> OnednnOptions:
        return OnednnOptions(algorithm=args.onednn_algorithm, implementations=dict(args.onednn_impl or ()))

    def to_args(self, options: OnednnOptions) -> list[str]:
        args = [] if options.algorithm == "race" else ["--onednn-algorithm", options.algorithm]
        for key, spec in sorted(options.implementations.items()):
            args += ["--onednn-impl", spec if key == PIN_ALL else f"{key}={spec}"]
        return args

    def replay(self, options: OnednnOptions, results: Iterable[KernelResult]) -> OnednnOptions:
        """The implementations the submission ran (its results name them), not a fresh race; pins the
        submission itself gave stay."""
        return options.model_copy(update={"implementations": {**recorded_pins(results), **options.implementations}})


def recorded_pins(results: Iterable[KernelResult]) -> dict[str, str]:
    """'<item id>/<direction>' -> the implementation each ok convolution direction ran (info.onednn.pin)."""
    out: dict[str, str] = {}
    for r in results:
        if r.status is not Status.OK:
            continue
        for p in r.parts:
            info = info_of(OnednnPartInfo, p.info)
            if info is not None and info.onednn.pin:
                out[f"{r.id}/{p.direction}"] = info.onednn.pin
    return out


ONEDNN = OnednnDeclaration("onednn", OnednnOptions, "oneDNN backend")
