"""Convolution on cuDNN's graph API: each direction one graph, one engine, one library call.

The problem is DeepBench's (`conv_bench.cu`): its layouts by default (declaration.layouts: --layout),
its directions (forward only in the inference sets, as its `if (!inference)`), its padding (half
channels to 8; int8 channels, height and width to 4, then channels to 32; kernels/padding.py),
fp32 accumulation for 16-bit types and int32 for int8. The engine is chosen by ../engine_choice.py (or
pinned with --cudnn-engine). Checks: sampled output elements recomputed in float64 from the
definition (kernels/reference/conv.py, the sampler the PyTorch backend is checked with too), exact for int8."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ...catalog import ConvKernel
from ...precision import Precision
from ...reference.conv import ConvSampler, padded_conv, transform_aware
from ...results import Check
from ...timing.graph_events import quick_us
from ...timing.stopping import StopRule
from .. import engine_choice as engines
from ..base import Backend, Prepared, TimedPart, Unsupported
from ..layout_info import NCHW, NHWC
from ..timed_directions import INFERENCE_FORWARD_ONLY
from . import graphs
from .declaration import CUDNN, layouts

if TYPE_CHECKING:
    from .backend import CudnnBackend

REFINE_SAMPLES = 4  # a contender's second timing: 4 samples of timing.graph_events.QUICK_SAMPLE_S
RACED_APART = "a process of its own (--engine-race apart, kernels/backends/cudnn/race_apart.py)"
RACED_HERE = "the measuring process (--engine-race inline)"
INT8_NCHW = "cuDNN's int8 convolution runs with channels innermost (NHWC): it has no int8 NCHW path"
INPUT_ROLES = {"fwd": ("x", "w"), "bwd_data": ("dy", "w"), "bwd_filter": ("x", "dy")}
OUTPUT_ROLE = {"fwd": "y", "bwd_data": "dx", "bwd_filter": "dw"}


def prepare(backend: CudnnBackend, kernel: ConvKernel, precision: Precision) -> Prepared:
    if precision not in graphs.TYPES:
        raise Unsupported(f"cuDNN's convolution has no {precision.value} path here (fp32, tf32, fp16, bf16, int8)")
    ctx = backend.ctx
    options = CUDNN.options_of(backend.settings)
    timed_layouts = layouts(precision, options.layout)
    layout, why = backend.layout or timed_layouts[0]  # a layout set on the backend: the other of --layout both
    if precision is Precision.INT8 and layout == NCHW:
        raise Unsupported(INT8_NCHW)
    cl = layout == NHWC
    kk, padded = padded_conv(kernel, precision, ctx.pad)
    directions = graphs.PRECISION_DIRECTIONS.get(precision, kernel.timed())
    pins = {d: engines.pin_for(options.engines, f"{kernel.id}/{precision.value}", d) for d in directions}
    races = not all(pins.values())
    apart = races and options.engine_race == "apart"  # race_apart.py says why
    warmed: dict[str, Any] = {}
    if races:  # candidates are timed on a GPU at its working temperature, as measurements are (here: once a run)
        assert backend.cuda is not None  # set with the binding, which prepare() checked
        backend.cuda.warm(warmed)
    # before this process allocates
    raced = backend.race_apart.choices(kernel, precision, ctx.pad, (layout, why)) if apart else {}
    dtype = graphs.TORCH_DTYPES[precision]
    data = {
        "x": ctx.random((kk.n, kk.c, kk.h, kk.w), dtype),
        "w": ctx.random((kk.k, kk.c, kk.r, kk.s), dtype, scale=(kk.c * kk.r * kk.s) ** -0.5),
        "dy": ctx.random((kk.n, kk.k, kk.out_h, kk.out_w), dtype),
    }
    if cl:
        data = {role: t.contiguous(memory_format=torch.channels_last) for role, t in data.items()}
    out_dtype = torch.int32 if precision is Precision.INT8 else dtype
    sampler = ConvSampler(ctx, kk, data["x"], data["w"], data["dy"])
    checks: dict[str, Callable[[torch.Tensor], Check]] = {
        "fwd": lambda y: sampler.check_fwd(y, precision),
        "bwd_data": lambda dx: sampler.check_bwd_data(dx, precision),
        "bwd_filter": lambda dw: sampler.check_bwd_filter(dw, precision),
    }
    out_dims = {
        "fwd": (kk.n, kk.k, kk.out_h, kk.out_w),
        "bwd_data": (kk.n, kk.c, kk.h, kk.w),
        "bwd_filter": (kk.k, kk.c, kk.r, kk.s),
    }
    parts = []
    for direction in directions:
        out = graphs.tensor_for(out_dims[direction], out_dtype, cl)
        part = _direction(
            backend,
            kk,
            precision,
            direction,
            data,
            out,
            checks[direction],
            pins[direction],
            raced[direction] if apart and not pins[direction] else None,
            cl,
        )
        part.flops, part.min_bytes = kernel.flops(direction), kernel.min_bytes(direction, precision)
        part.info.update(layout=layout, layout_reason=why)
        parts.append(part)
    parts[0].info["cudnn"].update(warmed)
    info: dict[str, Any] = {}
    if precision is Precision.INT8:
        info.update(directions=list(directions), backward=graphs.INT8_FORWARD_ONLY)
    elif kernel.forward_only:
        info.update(directions=list(directions), backward=INFERENCE_FORWARD_ONLY)
    beside = timed_layouts[1:] if backend.layout is None else []
    after = beside_layout(backend, kernel, precision, *beside[0]) if beside else None
    return Prepared(parts=parts, padding=padded, info=info, after=after)


def beside_layout(
    backend: CudnnBackend, kernel: ConvKernel, precision: Precision, layout: str, why: str
) -> Callable[[Backend, StopRule], dict[str, Any]]:
    """--layout both: the kernel prepared again in `layout`, each direction raced, timed and checked
    as the result's own were, under the key `other_layout` (layout_info.py reads it back)."""

    def after(_outer: Backend, rule: StopRule) -> dict[str, Any]:
        record: dict[str, Any] = {"layout": layout}
        try:
            with backend.in_layout(layout, why):
                other = backend.prepare(kernel, precision)
        except Unsupported as exc:
            return {"other_layout": {**record, "note": str(exc)}}
        timed: dict[str, Any] = {}
        for part in other.parts:
            part.run()  # warm-up, as the harness's first call
            stats = (part.timer(part.run, rule) if part.timer else backend.measure(part.run, rule, part)).stats
            check = part.check()
            if not check.passed:
                failed = f"{part.direction}: check failed (error {check.error} > tolerance {check.tolerance})"
                return {"other_layout": {**record, "failed": failed}}
            timed[part.direction] = {"time_us": stats.model_dump(), "check": check.model_dump(), **part.info}
        return {"other_layout": {**record, "parts": timed}}

    return after


def _direction(
    backend: CudnnBackend,
    kk: ConvKernel,
    precision: Precision,
    direction: str,
    data: dict[str, torch.Tensor],
    out: torch.Tensor,
    check_out: Callable[[torch.Tensor], Check],
    pin: str | None,
    raced: dict[str, Any] | None,
    channels_last: bool,
) -> TimedPart:
    """The direction's part, on its pinned plan, on the plan chosen by the race apart (`raced`: its
    record, race_apart.py), or on the plan chosen by a race here."""
    cudnn, handle = backend.lib, backend.handle
    at: int | None = None
    if raced is not None:
        pin, at = raced["plan_name"], raced["heuristic_index"]
    state: dict[str, Any] = {}

    def plan(compiled: bool) -> list[engines.Engine]:
        """A fresh graph's candidates (cuDNN plans once per graph); the calls below run on it."""
        g, roles = graphs.build(cudnn, handle.handle, kk, precision, direction, channels_last)
        pack = {roles[r]: data[r] for r in INPUT_ROLES[direction]}
        pack[roles[OUTPUT_ROLE[direction]]] = out
        found = [_pinned(cudnn, g, pin, at)] if pin else _candidates(cudnn, g, precision, compiled)
        if found:
            state.update(graph=g, pack=pack, workspace=backend.workspace_for(max(e.workspace for e in found)))
        return found

    def runner(e: engines.Engine) -> Callable[[], None]:
        g, pack, workspace = state["graph"], state["pack"], state["workspace"]

        def run() -> None:
            g.execute_plan_at_index(pack, workspace, e.index, handle=handle.bind())

        return run

    def check_of(run: Callable[[], None]) -> Callable[[], Check]:
        """The check of what `run` last wrote (with Winograd/FFT's tolerance where its kernels are those)."""
        return transform_aware(TimedPart(direction, run, lambda: check_out(out), 0.0, 0.0), precision)

    def check_engine(e: engines.Engine) -> Check:
        out.fill_(0)  # the check must see what this engine wrote, not the previous one's output
        run = runner(e)
        run()
        return check_of(run)()

    candidates = plan(compiled=False)
    if raced is not None:
        chosen, record = candidates[0], {**raced, "raced_in": RACED_APART}
        if chosen.index != at:  # found by name elsewhere in cuDNN's list: the two processes' lists differed
            record["heuristic_index_here"] = chosen.index
    elif pin:
        chosen, record = candidates[0], {**candidates[0].record(), "chosen_by": f"pinned (--cudnn-engine {pin})"}
    else:
        chosen, record = _choose(
            candidates, lambda: plan(compiled=True), runner, check_engine, direction, precision, kk
        )
        record["raced_in"] = RACED_HERE
    run = runner(chosen)
    info = {
        "library": "cuDNN",
        "api": "graph (cudnn-frontend)",
        "cudnn": record,
    }
    return TimedPart(direction, run, check_of(run), 0.0, 0.0, info=info, output=out)


def _choose(
    candidates: list[engines.Engine],
    with_compiled: Callable[[], list[engines.Engine]],
    runner: Callable[[engines.Engine], Callable[[], None]],
    check: Callable[[engines.Engine], Check],
    direction: str,
    precision: Precision,
    kk: ConvKernel,
) -> tuple[engines.Engine, dict[str, Any]]:
    """engine_choice's rule over the precompiled engines; where none of them computes the direction
    correctly (or there is none), over the engines cuDNN compiles at run time as well (seconds
    each: the int8 convolutions on an H100, where the precompiled int8 engines wrote wrong outputs)."""

    def timed(e: engines.Engine, out_of_contest_us: float) -> float:
        return quick_us(runner(e), out_of_contest_us=out_of_contest_us)

    def refined(e: engines.Engine) -> float:
        return quick_us(runner(e), samples=REFINE_SAMPLES)

    first: list[dict[str, Any]] = []
    if candidates:
        try:
            choice = engines.choose(candidates, timed, check, refine=refined)
            return choice.chosen, choice.record()
        except engines.NoCorrectEngine as exc:
            first = [{"pass": "precompiled engines", "outcome": str(exc)[:1000]}]
    compiled = with_compiled()
    if not compiled:
        raise Unsupported(
            f"cuDNN offers no engine for this {precision.value} {direction} convolution "
            f"(n={kk.n} c={kk.c} h={kk.h} w={kk.w} k={kk.k} r={kk.r} s={kk.s})"
            + (f"; {first[0]['outcome']}" if first else "")
        )
    choice = engines.choose(compiled, timed, check, refine=refined)
    return choice.chosen, {**choice.record(), "runtime_compiled_allowed": True, "earlier": first}


def _candidates(cudnn: Any, g: Any, precision: Precision, compiled: bool) -> list[engines.Engine]:
    """The plans cuDNN's heuristics offer that build, in its order, at most MAX_CANDIDATES,
    without duplicates (modes A and FALLBACK overlap); engines compiled at run time only when
    `compiled`. A duplicate is the same plan name: two plans of one engine and the same listed
    knobs can differ in a knob the frontend's list leaves out (engine 49's split-K), and are two
    candidates."""
    _offer_plans(cudnn, g)
    if not compiled:
        g.deselect_behavior_notes([cudnn.behavior_note.RUNTIME_COMPILATION])
    notes = graphs.TYPES[precision].excluded_notes
    if notes:
        g.deselect_numeric_notes([getattr(cudnn.numerical_note, n) for n in notes])
    g.deselect_workspace_greater_than(engines.WORKSPACE_LIMIT)
    out: list[engines.Engine] = []
    seen: set[str] = set()
    for i in range(g.get_execution_plan_count()):
        if len(out) >= engines.MAX_CANDIDATES:
            break
        e = _built(g, i, rank=len(out))
        if e is not None and (e.name or e.spec) not in seen:
            seen.add(e.name or e.spec)
            out.append(e)
    return out


def _pinned(cudnn: Any, g: Any, spec: str, at: int | None = None) -> engines.Engine:
    """The plan a pin names (`at`: where cuDNN's heuristic list had it for the race, tried first)."""
    if engines.is_plan_name(spec):
        return _named_plan(cudnn, g, spec.strip(), at)
    engine_id, knobs = engines.parse_spec(spec)
    try:
        typed = {getattr(cudnn.knob_type, name): value for name, value in knobs.items()}
    except AttributeError as exc:
        raise Unsupported(f"cuDNN engine '{spec}': unknown knob ({exc})") from None
    g.create_execution_plan(engine_id, typed)
    index = g.get_execution_plan_count() - 1
    try:
        g.build_plan_at_index(index)
    except Exception as exc:  # noqa: BLE001 - the pinned engine does not serve this problem here
        raise Unsupported(f"the pinned cuDNN engine '{spec}' cannot run this convolution here: {exc}"[:500]) from None
    return engines.Engine(
        index=index,
        engine_id=engine_id,
        knobs=knobs,
        name=str(g.get_plan_name_at_index(index)),
        workspace=int(g.get_workspace_size_plan_at_index(index)),
    )


def _named_plan(cudnn: Any, g: Any, name: str, at: int | None = None) -> engines.Engine:
    """The plan cuDNN names `name`, found among the plans its heuristics offer for this graph (all of
    them: a recorded plan may need runtime compilation or a large workspace): the exact plan, every
    knob included, which re-creating it from cudnn-frontend's knob list cannot promise. `at` is
    tried first: building only that plan spares building (or compiling) the ones before it."""
    _offer_plans(cudnn, g)
    count = g.get_execution_plan_count()
    if at is not None and 0 <= at < count:
        e = _built(g, at)
        if e is not None and e.name == name:
            return e
    for i in range(count):
        e = _built(g, i)
        if e is not None and e.name == name:
            return e
    raise Unsupported(
        f"cuDNN's heuristics offer no plan named '{name}' for this convolution here (another cuDNN "
        "or GPU than the one that recorded it?); pin ENGINE_ID:KNOBS to re-create it from its knobs"
    )


def _offer_plans(cudnn: Any, g: Any) -> None:
    """The plans cuDNN's heuristics offer for the graph (modes A, then FALLBACK), not yet built."""
    g.create_execution_plans([getattr(cudnn.heur_mode, m) for m in graphs.HEURISTICS])


def _built(g: Any, index: int, rank: int = 0) -> engines.Engine | None:
    """The plan at `index`, built: its engine id, listed knobs, cuDNN's name and workspace; None
    where it was deselected or this GPU cannot build it (not a candidate, not the plan asked for)."""
    try:
        g.build_plan_at_index(index)
        engine_id, knobs = g.get_engine_and_knobs_at_index(index)
        name = str(g.get_plan_name_at_index(index))
    except Exception:  # noqa: BLE001 - deselected, or a plan this GPU cannot build
        return None
    return engines.Engine(
        index=index,
        engine_id=int(engine_id),
        knobs=_knob_names(knobs),
        name=name,
        workspace=int(g.get_workspace_size_plan_at_index(index)),
        rank=rank,
    )


def _knob_names(knobs: dict[Any, int]) -> dict[str, int]:
    """{cudnn.knob_type: value} -> {name: value}, without the NOT_SET entry the frontend reports
    (which it cannot take back when a plan is re-created from the knobs)."""
    named = {str(getattr(k, "name", k)).upper(): int(v) for k, v in knobs.items()}
    named.pop("NOT_SET", None)
    return named
