"""What the cuDNN backend declares (backends/declaration.py), importable without cuDNN or torch:
its options (where engines are raced, engines pinned instead of chosen), their CLI group, the
engine each part ran (recorded in its info), and the pins `verify` re-runs from that record."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from ...precision import Precision
from ...results import KernelResult, Status
from ..declaration import BackendDeclaration, BackendOptions, PartInfo, info_of
from ..engine_choice import PIN_ALL, EngineError, check_pin, is_plan_name

# Where cuDNN's candidate plans are raced (--engine-race's choices; race_apart.py says why apart).
EngineRace = Literal["apart", "inline"]
ENGINE_RACES: tuple[str, ...] = get_args(EngineRace)


@dataclass(frozen=True)
class Types:
    io: str  # cudnn.data_type member name of inputs and outputs
    compute: str
    output: str  # of the direction's result (int8 forward: the int32 accumulator)
    channels_last: bool
    excluded_notes: tuple[str, ...] = ()  # cudnn.numerical_note members whose engines are not this precision


# The precisions cuDNN's convolution runs here, with cuDNN's types for each (graphs.py builds with them).
TYPES = {
    Precision.FP32: Types("FLOAT", "FLOAT", "FLOAT", False, ("TENSOR_CORE", "DOWN_CONVERT_INPUTS")),
    Precision.TF32: Types("FLOAT", "FLOAT", "FLOAT", False),
    Precision.FP16: Types("HALF", "FLOAT", "HALF", False),
    Precision.BF16: Types("BFLOAT16", "FLOAT", "BFLOAT16", False),
    Precision.INT8: Types("INT8", "INT32", "INT32", True),
}


class CudnnOptions(BackendOptions):
    engine_race: EngineRace = Field(
        "apart",
        description="GPU: cuDNN's engine race in a process of its own, so that the measuring process runs "
        "only the chosen plans, as a pinned native loop does (apart), or in the measuring process (inline); "
        "kernels/backends/cudnn/race_apart.py says why",
    )
    engines: dict[str, str] = Field(
        default_factory=dict,
        description="cuDNN engines pinned instead of chosen: '<item id>/<direction>' (or '*') "
        "-> an engine as results record it, e.g. 'eng34_k2=2_k3=0' (verify re-runs the recorded engines)",
    )


class CudnnPlan(BaseModel):
    """The plan a direction ran (engine_choice.Engine.record, and how it was chosen)."""

    model_config = ConfigDict(frozen=True, extra="allow")
    engine: str
    plan_name: str = ""
    workspace_bytes: int = 0

    @property
    def pin(self) -> str:
        """The exact pin: the plan's name (every knob), else its engine and listed knobs."""
        return self.plan_name if is_plan_name(self.plan_name) else self.engine


class CudnnPartInfo(PartInfo):
    """A part cuDNN ran: the library, its API, the layout, and the plan."""

    library: str = ""
    api: str = ""
    layout: str = ""
    cudnn: CudnnPlan


def engine_pin(value: str) -> tuple[str, str]:
    """One --cudnn-engine value -> ('<item id>/<direction>' or '*', the engine)."""
    head, eq, rest = value.partition("=")
    key, spec = (head, rest) if eq and "/" in head else ("", value)  # a kernel's id has slashes, a knob none
    try:
        check_pin(spec)
    except EngineError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return key.strip() or PIN_ALL, spec.strip()


class CudnnDeclaration(BackendDeclaration[CudnnOptions]):
    part_info = CudnnPartInfo
    precisions = TYPES

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument(
            "--cudnn-engine",
            action="append",
            type=engine_pin,
            metavar="[ID/DIR=]ENGINE",
            help="GPU: run this cuDNN plan instead of choosing one: its name as results record it in "
            "info.cudnn.plan_name (e.g. eng34_k2=3, every knob: the exact plan), or an engine and "
            "knobs as in info.cudnn.engine (e.g. 34:TILE_SIZE=3, re-created from those knobs); for one "
            "direction of one kernel with 'conv/train/052/fp32/bwd_filter=eng34_k2=3' (repeatable), "
            "else for every convolution",
        )
        group.add_argument(
            "--engine-race",
            choices=ENGINE_RACES,
            default=CudnnOptions.model_fields["engine_race"].default,
            help="GPU: where cuDNN's candidate plans are raced: apart (default) in a process of its own, so "
            "that the measuring process runs only the chosen plans, as a native loop pinned to them "
            "does (racing some candidates left later short convolutions ~1 us a call slower on an "
            "H100 for the rest of the process); inline in the measuring process",
        )

    def options_from(self, args: argparse.Namespace) -> CudnnOptions:
        return CudnnOptions(engine_race=args.engine_race, engines=dict(args.cudnn_engine or ()))

    def to_args(self, options: CudnnOptions) -> list[str]:
        args = [] if options.engine_race == "apart" else ["--engine-race", options.engine_race]
        for key, engine in sorted(options.engines.items()):
            args += ["--cudnn-engine", engine if key == PIN_ALL else f"{key}={engine}"]
        return args

    def replay(self, options: CudnnOptions, results: Iterable[KernelResult]) -> CudnnOptions:
        """The very plans the submission ran (its results name them), not a fresh choice; pins the
        submission itself gave stay."""
        return options.model_copy(update={"engines": {**recorded_engines(results), **options.engines}})


def recorded_engines(results: Iterable[KernelResult]) -> dict[str, str]:
    """'<item id>/<direction>' -> the cuDNN plan each ok direction ran: its name (info.cudnn.plan_name,
    every knob included), else its engine and listed knobs (info.cudnn.engine)."""
    out: dict[str, str] = {}
    for r in results:
        if r.status is not Status.OK:
            continue
        for p in r.parts:
            info = info_of(CudnnPartInfo, p.info)
            if info is not None:
                out[f"{r.id}/{p.direction}"] = info.cudnn.pin
    return out


CUDNN = CudnnDeclaration("cudnn", CudnnOptions)
