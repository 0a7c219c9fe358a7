"""What the cuDNN backend declares (backends/contract/declaration.py), importable without cuDNN or torch:
its options (where engines are raced, engines pinned instead of chosen, the tensors' layout, where the
race's leaders are kept between runs), their CLI group, the engine and layout each part ran and where
its engine came from (recorded in its info), the pins `verify` re-runs from that record, and its find-db
(engine_cache.py)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from ...precision import Precision
from ...results import KernelResult, Status
from ..contract.declaration import BackendDeclaration, BackendOptions, PartInfo, add_choice, info_of
from ..contract.layout_info import NCHW, NHWC
from ..gpu.cuda.packages import INSTALL_HINT
from .engine_cache import FROM_CACHE, FROM_PIN, FROM_RACE, FROM_SYSTEM, OFF, SPEC
from .engine_choice import PIN_ALL, EngineError, check_pin, is_plan_name

# Where cuDNN's candidate plans are raced (--engine-race's choices; race_apart.py says why apart).
EngineRace = Literal["apart", "inline"]
# The tensors' memory layout (--layout's choices): DeepBench's per precision, one for all, or both.
LayoutChoice = Literal["deepbench", "nchw", "nhwc", "both"]
LAYOUT_CHOICES: tuple[str, ...] = get_args(LayoutChoice)
# Where a direction's engine came from: a race over cuDNN's whole search, a race among the leaders the user's
# cache or the shipped db named (engine_cache.py), or a pin.
EngineFrom = Literal["race", "cache", "system-db", "pinned"]
assert set(get_args(EngineFrom)) == {FROM_RACE, FROM_CACHE, FROM_SYSTEM, FROM_PIN}


@dataclass(frozen=True)
class Types:
    io: str  # cudnn.data_type member name of inputs and outputs
    compute: str
    output: str  # of the direction's result (int8 forward: the int32 accumulator)
    channels_last: bool  # DeepBench's layout for this precision (conv_bench.cu; deepbench_layout says why)
    excluded_notes: tuple[str, ...] = ()  # cudnn.numerical_note members whose engines are not this precision


# The precisions cuDNN's convolution runs here, with cuDNN's types for each (graphs.py builds with them).
TYPES = {
    Precision.FP32: Types("FLOAT", "FLOAT", "FLOAT", False, ("TENSOR_CORE", "DOWN_CONVERT_INPUTS")),
    Precision.TF32: Types("FLOAT", "FLOAT", "FLOAT", False),
    Precision.FP16: Types("HALF", "FLOAT", "HALF", True),
    Precision.BF16: Types("BFLOAT16", "FLOAT", "BFLOAT16", True),
    Precision.INT8: Types("INT8", "INT32", "INT32", True),
}


# Why each precision's default layout is the one DeepBench's conv_bench.cu handed cuDNN.
WHY_NHWC_HALF = "deepbench: NHWC, as conv_bench.cu's tensor-core build handed cuDNN half convolutions"
WHY_NCHW_FLOAT = "deepbench: NCHW, as conv_bench.cu handed cuDNN float convolutions"
# DeepBench handed int8 in NCHW_VECT_C (CUDNN_DATA_INT8x32) on compute capability 7.5 and later.
# cudnn-frontend 1.32's graph tensors can say so (tensor.set_vector_count_and_dimension(32, 1)), but
# cuDNN's engines for such tensors need the filter reordered first (cudnnReorderFilterAndBias, which
# the Python frontend does not expose) and write int8 outputs, not the int32 accumulator this
# backend checks exactly; so int8 runs in the layout DeepBench fell back to below 7.5.
WHY_NHWC_INT8 = (
    "deepbench: NHWC with channels padded to 32, DeepBench's int8 layout below compute capability 7.5 "
    "(its NCHW_VECT_C/INT8x32 layout needs a filter reordering that cudnn-frontend's Python graphs do "
    "not offer, and writes int8, not the int32 accumulator checked here)"
)
WHY_CHOSEN = "--layout {choice}: the same layout for every precision"


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
    engine_cache: str = Field(
        "",
        description="where the engine race's leaders are kept between runs (kernels/backends/cudnn/"
        "engine_cache.py): '' the user's cache folder (XDG_CACHE_HOME or ~/.cache, then deepbench/cudnn-engines), "
        "'off' none (every direction searched whole), or a folder",
    )
    layout: LayoutChoice = Field(
        "deepbench",
        description="the convolution tensors' memory layout: DeepBench's per precision (NHWC for 16-bit "
        "and int8, NCHW for fp32 and tf32), NCHW or NHWC for all, or both (DeepBench's, and the other "
        "timed beside it: the layout penalty)",
    )


class CacheNote(BaseModel):
    """What the engine cache had to do with a direction: the db file its leaders came from, how many it raced,
    whether its race was recorded, and a line where a file was refused (the run searched instead) or the
    leaders were no longer good (the direction was searched whole)."""

    model_config = ConfigDict(frozen=True, extra="allow")
    source: str = ""
    leaders: int = 0
    recorded: bool = False
    warning: str = ""
    missed: str = ""


class CudnnPlan(BaseModel):
    """The plan a direction ran (engine_choice.Engine.record, and how it was chosen and where it came from:
    records before the cache raced, and say nothing of it)."""

    model_config = ConfigDict(frozen=True, extra="allow")
    engine: str
    plan_name: str = ""
    workspace_bytes: int = 0
    engine_from: EngineFrom = "race"
    engine_cache: CacheNote | None = None

    @property
    def pin(self) -> str:
        """The exact pin: the plan's name (every knob), else its engine and listed knobs."""
        return self.plan_name if is_plan_name(self.plan_name) else self.engine


class CudnnPartInfo(PartInfo):
    """A part cuDNN ran: the library, its API, the layout and why it is that one, and the plan."""

    library: str = ""
    api: str = ""
    layout: str = ""
    layout_reason: str = ""
    cudnn: CudnnPlan


def deepbench_layout(precision: Precision) -> tuple[str, str]:
    """(the layout DeepBench's conv_bench.cu handed cuDNN for this precision, why)."""
    if precision is Precision.INT8:
        return NHWC, WHY_NHWC_INT8
    if TYPES[precision].channels_last:
        return NHWC, WHY_NHWC_HALF
    return NCHW, WHY_NCHW_FLOAT


def layouts(precision: Precision, choice: str) -> list[tuple[str, str]]:
    """The layouts --layout `choice` times for `precision`, each with why, the result's own first
    (`both`: DeepBench's, then the other, timed beside it for the layout penalty)."""
    if choice == "deepbench":
        return [deepbench_layout(precision)]
    if choice == "both":
        first, why = deepbench_layout(precision)
        other = NCHW if first == NHWC else NHWC
        return [(first, why), (other, f"--layout both: the other layout, timed beside {first}")]
    return [(choice.upper(), WHY_CHOSEN.format(choice=choice))]


def engine_pin(value: str) -> tuple[str, str]:
    """One --cudnn-engine value -> ('<item id>/<direction>' or '*', the engine)."""
    head, eq, rest = value.partition("=")
    key, spec = (head, rest) if eq and "/" in head else ("", value)  # a kernel's id has slashes, a knob none
    try:
        check_pin(spec)
    except EngineError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return key.strip() or PIN_ALL, spec.strip()


def engine_cache_arg(value: str) -> str:
    """--engine-cache's value: 'off', or a folder (made absolute: the harness may run elsewhere); '' (the
    flag's default) the user's cache folder."""
    if not value.strip():
        return ""
    if value.strip().lower() == OFF:
        return OFF
    folder = Path(value).expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        raise argparse.ArgumentTypeError(f"--engine-cache {value}: not a folder (a folder of engine files, or off)")
    return str(folder)


class CudnnDeclaration(BackendDeclaration[CudnnOptions]):
    part_info = CudnnPartInfo
    precisions = TYPES
    libraries = ("cuDNN",)
    install_hint = INSTALL_HINT
    find_db = SPEC
    # graphs.py PRECISION_DIRECTIONS: cuDNN's int8 convolution has no backward.
    forward_only_precisions: ClassVar[Mapping[str, frozenset[str]]] = {"conv": frozenset({Precision.INT8.value})}

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
        add_choice(
            group,
            "--engine-race",
            CudnnOptions,
            "engine_race",
            "GPU: where cuDNN's candidate plans are raced: apart (default) in a process of its own, so "
            "that the measuring process runs only the chosen plans, as a native loop pinned to them "
            "does (racing some candidates left later short convolutions ~1 us a call slower on an "
            "H100 for the rest of the process); inline in the measuring process",
        )
        group.add_argument(
            "--engine-cache",
            type=engine_cache_arg,
            default="",
            metavar="FOLDER|off",
            help="GPU: where cuDNN's engine race keeps each direction's leaders (the winner and its runners-up) "
            "between runs, per GPU model, compute capability and library versions: a second run races only "
            "those, checked as ever (default: the user's cache folder, XDG_CACHE_HOME or ~/.cache, then "
            "deepbench/cudnn-engines; off: search every direction whole); `deepbench cache` lists, exports and "
            "imports it",
        )
        add_choice(
            group,
            "--layout",
            CudnnOptions,
            "layout",
            "GPU: the convolution tensors' memory layout: deepbench (default) as DeepBench's "
            "conv_bench.cu handed cuDNN each precision (NHWC for fp16 and bf16, which tensor cores read "
            "natively, and int8; NCHW for fp32 and tf32); nchw or nhwc for every precision; both times "
            "each convolution in DeepBench's layout and again in the other, and the report shows the "
            "layout penalty (NCHW time over NHWC time, per direction)",
        )

    def options_from(self, args: argparse.Namespace) -> CudnnOptions:
        return CudnnOptions(
            engine_race=args.engine_race,
            engines=dict(args.cudnn_engine or ()),
            layout=args.layout,
            engine_cache=args.engine_cache,
        )

    def to_args(self, options: CudnnOptions) -> list[str]:
        args = [] if options.engine_race == "apart" else ["--engine-race", options.engine_race]
        args += [] if options.layout == "deepbench" else ["--layout", options.layout]
        args += ["--engine-cache", options.engine_cache] if options.engine_cache else []
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
