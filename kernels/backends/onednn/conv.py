"""Convolution on oneDNN's convolution primitives: forward, backward-data and backward-weights, each
its own primitive, timed apart and summed, as DeepBench's Intel benchmark (std_conv_bench.cpp) ran
MKL-DNN.

The problem is DeepBench's: NCHW user tensors, its padding and strides, no bias (the other
backends' convolutions have none), the forward in training mode (forward_training, as
std_conv_bench.cpp asked; the backward passes take it as their hint) except int8, which oneDNN
runs as inference (forward_inference: DeepBench's u8s8 runs were forward only). Every tensor's
memory format is `any`, so the primitive picks its own blocked layout (nChw16c, OIhw16i16o ...);
the user's NCHW data reaches that layout by oneDNN's reorder when the kernel is prepared, and
the output comes back the same way before its check: the timed call is the primitive's execution
and the stream's wait, nothing else. The scratchpad is the caller's (allocated once).

Padding: DeepBench's Intel code handed MKL-DNN every convolution at its listed shape (its
channel and image padding, kernels/padding.py, is conv_bench.cu's, for cuDNN's tensor cores), so
nothing is padded here, in any precision.

Which implementation runs each direction: race.py (the algorithms convolution_direct,
convolution_winograd and convolution_auto, every implementation oneDNN's iterator offers for
each), DeepBench's convolution_direct's first with --onednn-algorithm direct, or one pinned with
--onednn-impl. Checks: sampled elements recomputed in float64 from the definition
(kernels/reference/conv_numpy.py), exact for int8 (u8 activations, s8 weights, int32 outputs: the
accumulator itself, no scales, which would pass it through float32)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...catalog import ConvKernel
from ...precision import TRANSFORM_TOLERANCE, Precision, tolerance
from ...reference import conv_numpy
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from ..contract.timed_directions import INFERENCE_FORWARD_ONLY
from . import constants as C
from . import race
from .binding import DnnlError, dims
from .context import OnednnContext
from .declaration import PIN_SEPARATOR, PRECISIONS, pin_for
from .objects import Attr, MemoryDesc, Primitive, PrimitiveDesc, created_pd
from .tensors import Placed, as_float, stored

DATA_TYPES = {"f32": C.F32, "bf16": C.BF16, "f16": C.F16, "u8": C.U8, "s8": C.S8, "s32": C.S32}
ALGORITHMS = {
    "convolution_direct": C.CONVOLUTION_DIRECT,
    "convolution_winograd": C.CONVOLUTION_WINOGRAD,
    "convolution_auto": C.CONVOLUTION_AUTO,
}
CHOICES = {"direct": "convolution_direct", "winograd": "convolution_winograd", "auto": "convolution_auto"}
INT8_FORWARD_ONLY = (
    "backward (bwd_data, bwd_filter) not timed: oneDNN's int8 convolution is an inference primitive, as "
    "DeepBench's int8 ran forward only"
)
NO_PADDING = "none: DeepBench's Intel benchmark (std_conv_bench.cpp) handed MKL-DNN the listed shapes"


@dataclass(frozen=True)
class Role:
    """A tensor a direction reads or writes: its name, DNNL_ARG_*, the query of its memory descriptor."""

    name: str
    arg: int
    query: int


# direction -> (inputs, output, primitive's name)
DIRECTIONS = {
    "fwd": (
        (Role("x", C.ARG_SRC, C.QUERY_SRC_MD), Role("w", C.ARG_WEIGHTS, C.QUERY_WEIGHTS_MD)),
        Role("y", C.ARG_DST, C.QUERY_DST_MD),
        "convolution_forward",
    ),
    "bwd_data": (
        (Role("dy", C.ARG_DIFF_DST, C.QUERY_DIFF_DST_MD), Role("w", C.ARG_WEIGHTS, C.QUERY_WEIGHTS_MD)),
        Role("dx", C.ARG_DIFF_SRC, C.QUERY_DIFF_SRC_MD),
        "convolution_backward_data",
    ),
    "bwd_filter": (
        (Role("x", C.ARG_SRC, C.QUERY_SRC_MD), Role("dy", C.ARG_DIFF_DST, C.QUERY_DIFF_DST_MD)),
        Role("dw", C.ARG_DIFF_WEIGHTS, C.QUERY_DIFF_WEIGHTS_MD),
        "convolution_backward_weights",
    ),
}


class Problem:
    """The convolution's descriptors (every format `any`) and its operands (user-side values)."""

    def __init__(self, ctx: OnednnContext, kernel: ConvKernel, precision: Precision) -> None:
        self.ctx, self.kernel, self.precision = ctx, kernel, precision
        kk, types = kernel, PRECISIONS[precision]
        self.shapes = {
            "x": (kk.n, kk.c, kk.h, kk.w),
            "w": (kk.k, kk.c, kk.r, kk.s),
            "y": (kk.n, kk.k, kk.out_h, kk.out_w),
        }
        self.shapes.update(dy=self.shapes["y"], dx=self.shapes["x"], dw=self.shapes["w"])
        source, weights, destination = (DATA_TYPES[t] for t in (types.source, types.weights, types.destination))
        self.types = {"x": source, "w": weights, "y": destination, "dy": destination, "dx": source, "dw": weights}
        self.mds = {
            role: MemoryDesc(ctx.lib, shape, self.types[role], C.TAG_ANY) for role, shape in self.shapes.items()
        }
        self.geometry = conv_numpy.Geometry(kk.pad_h, kk.pad_w, kk.stride_h, kk.stride_w)
        self.data = self._operands()
        self.attr = _attr(ctx)

    def _operands(self) -> dict[str, np.ndarray]:
        """x, w and dy as the primitive's types hold them (16-bit floats rounded: the reference reads these)."""
        ctx, p, shapes = self.ctx, self.precision, self.shapes
        if p is Precision.INT8:
            return {"x": ctx.unsigned_activations(shapes["x"]), "w": ctx.signed_weights(shapes["w"])}
        raw = {
            "x": ctx.floats(shapes["x"], p),
            "w": ctx.floats(shapes["w"], p, scale=(self.kernel.c * self.kernel.r * self.kernel.s) ** -0.5),
            "dy": ctx.floats(shapes["y"], p),
        }
        return {role: as_float(stored(values, self.types[role]), self.types[role]) for role, values in raw.items()}

    def _conv_tail(self) -> tuple[Any, Any, Any, Any]:
        kk = self.kernel
        return dims([kk.stride_h, kk.stride_w]), dims([0, 0]), dims([kk.pad_h, kk.pad_w]), dims([kk.pad_h, kk.pad_w])

    def forward(self, algorithm: int) -> PrimitiveDesc:
        lib, md = self.ctx.lib, self.mds
        prop = C.FORWARD_INFERENCE if self.precision is Precision.INT8 else C.FORWARD_TRAINING
        return created_pd(
            lib,
            "dnnl_convolution_forward_primitive_desc_create",
            lib.dnnl_convolution_forward_primitive_desc_create,
            self.ctx.engine.handle,
            prop,
            algorithm,
            md["x"].handle,
            md["w"].handle,
            None,
            md["y"].handle,
            *self._conv_tail(),
            self.attr,
        )

    def descriptor(self, direction: str, algorithm: int) -> PrimitiveDesc:
        """The direction's primitive descriptor at oneDNN's first implementation (DnnlError where none)."""
        if direction == "fwd":
            return self.forward(algorithm)
        lib, md, engine = self.ctx.lib, self.mds, self.ctx.engine.handle
        hint = self.forward(algorithm)
        if direction == "bwd_data":
            create = lib.dnnl_convolution_backward_data_primitive_desc_create
            operands: tuple[Any, ...] = (md["dx"].handle, md["w"].handle, md["dy"].handle)
        else:
            create = lib.dnnl_convolution_backward_weights_primitive_desc_create
            operands = (md["x"].handle, md["dw"].handle, None, md["dy"].handle)
        pd = created_pd(
            lib,
            f"{DIRECTIONS[direction][2]} descriptor",
            create,
            engine,
            algorithm,
            *operands,
            *self._conv_tail(),
            hint.handle,
            self.attr,
        )
        pd.hint = hint
        return pd


def _attr(ctx: OnednnContext) -> Any:
    """The attributes every convolution descriptor takes (objects.Attr), kept for the context's life."""
    attr = Attr(ctx.lib)
    ctx.keep.append(attr)
    return attr.handle


class Runner:
    """One implementation's primitive on its own copies of the direction's inputs, in its layouts."""

    def __init__(self, problem: Problem, direction: str, pd: PrimitiveDesc) -> None:
        inputs, output, _ = DIRECTIONS[direction]
        engine, self.problem, self.direction, self.pd = problem.ctx.engine, problem, direction, pd
        self.tensors = {
            role.name: Placed(engine, problem.shapes[role.name], problem.types[role.name], pd.md(role.query))
            for role in (*inputs, output)
        }
        for role in inputs:
            self.tensors[role.name].fill(problem.data[role.name])
        self.output = self.tensors[output.name]
        self.primitive = Primitive(engine, pd, {role.arg: self.tensors[role.name].memory for role in (*inputs, output)})
        self.run = self.primitive.run

    def formats(self) -> dict[str, str]:
        return {name: placed.format for name, placed in self.tensors.items()}

    def check(self, transform: bool) -> Check:
        """The output the last run left, against the float64 definition at sampled elements."""
        p, d, g, data = self.problem, self.direction, self.problem.geometry, self.problem.data
        out, rng, precision = self.output.read(), p.ctx.rng, p.precision
        tol = _tolerance(p.kernel, precision, d, transform)
        if d == "fwd":
            return conv_numpy.check_forward(out, data["x"], data["w"], g, precision, rng, tol)
        if d == "bwd_data":
            return conv_numpy.check_backward_data(out, data["dy"], data["w"], g, precision, rng, tol)
        return conv_numpy.check_backward_filter(out, data["x"], data["dy"], g, precision, rng, tol)


def _tolerance(kk: ConvKernel, precision: Precision, direction: str, transform: bool) -> float | None:
    """The precision's over the direction's reduction; Winograd's (TRANSFORM_TOLERANCE) where it ran one."""
    if precision is Precision.INT8:
        return None
    reduction = {"fwd": kk.c * kk.r * kk.s, "bwd_data": kk.k * kk.r * kk.s, "bwd_filter": kk.n * kk.out_h * kk.out_w}[
        direction
    ]
    bound = tolerance(precision, reduction=reduction)
    return max(bound, TRANSFORM_TOLERANCE.get(precision, 0.0)) if transform else bound


def candidates(problem: Problem, direction: str, algorithms: tuple[str, ...]) -> tuple[list[race.Candidate], list[str]]:
    """Every implementation oneDNN offers for the direction under each algorithm, in its order; and why an
    algorithm offers none (oneDNN's status)."""
    found: list[race.Candidate] = []
    notes: list[str] = []
    for name in algorithms:
        try:
            pd = problem.descriptor(direction, ALGORITHMS[name])
        except DnnlError as exc:
            notes.append(f"{name}: {exc}")
            continue
        for impl in pd.implementations():
            found.append(race.Candidate(name, impl.impl, len(found), impl))
    return found, notes


def prepare(ctx: OnednnContext, kernel: ConvKernel, precision: Precision) -> Prepared:
    if precision not in PRECISIONS:
        raise Unsupported(
            f"oneDNN's convolution runs fp32, bf16, fp16 and int8 here; {precision.value} is not one of them"
        )
    missing = ctx.missing_isa(precision)
    if missing:
        raise Unsupported(
            f"oneDNN's {precision.value} convolution needs {missing}; this CPU's ISA in oneDNN is {ctx.isa_name}"
        )
    problem = Problem(ctx, kernel, precision)
    directions = ("fwd",) if precision is Precision.INT8 else kernel.timed()
    offers = [_offer(problem, d) for d in directions]  # every direction's offer before any race
    parts = [_part(problem, offer) for offer in offers]
    info: dict[str, Any] = {}
    if precision is Precision.INT8:
        info.update(directions=list(directions), backward=INT8_FORWARD_ONLY)
    elif kernel.forward_only:
        info.update(directions=list(directions), backward=INFERENCE_FORWARD_ONLY)
    return Prepared(parts=parts, info=info)


@dataclass
class Offer:
    """What oneDNN offers one direction: its candidates, the pin that names one, why an algorithm offers none."""

    direction: str
    candidates: list[race.Candidate]
    pin: str | None
    notes: list[str]


def _offer(problem: Problem, direction: str) -> Offer:
    """The direction's candidates under the options (a pin's algorithm, one algorithm, or all of them to race)."""
    ctx, kernel = problem.ctx, problem.kernel
    pin = pin_for(ctx.options.implementations, f"{kernel.id}/{problem.precision.value}", direction)
    algorithms = (
        (pin.partition(PIN_SEPARATOR)[0],)
        if pin
        else tuple(ALGORITHMS)
        if ctx.options.algorithm == "race"
        else (CHOICES[ctx.options.algorithm],)
    )
    offered, notes = candidates(problem, direction, tuple(a for a in algorithms if a in ALGORITHMS))
    if not offered:
        raise Unsupported(
            f"oneDNN offers no {problem.precision.value} {direction} convolution here "
            f"({'; '.join(notes) or algorithms[0]})"[:500]
        )
    if not pin and all(c.impl.startswith(race.REFERENCE_PREFIX) for c in offered):
        raise Unsupported(
            f"oneDNN offers only its reference implementation (plain loops: {offered[0].impl}) for this "
            f"{problem.precision.value} {direction} convolution on {ctx.isa_name}: no optimized kernel to time"
        )
    return Offer(direction, offered, pin, notes)


def _part(problem: Problem, offer: Offer) -> TimedPart:
    """The direction on its pinned, first or raced implementation, with what oneDNN ran it with."""
    ctx, kernel, direction, offered, pin, notes = (
        problem.ctx,
        problem.kernel,
        offer.direction,
        offer.candidates,
        offer.pin,
        offer.notes,
    )
    chosen, record = _choose(problem, direction, offered, pin)
    runner = Runner(problem, direction, chosen.build)
    transform = chosen.algorithm == "convolution_winograd"
    record.update(
        implementation=chosen.impl,
        algorithm=chosen.algorithm,
        pin=chosen.pin,
        formats=runner.formats(),
        padding=NO_PADDING,
        **ctx.facts,
    )
    if notes:
        record["not_offered"] = notes
    info = {"library": "oneDNN", "primitive": DIRECTIONS[direction][2], "onednn": record}
    flops, nbytes = kernel.flops(direction), kernel.min_bytes(direction, problem.precision)
    part = TimedPart(direction, runner.run, lambda: runner.check(transform), flops, nbytes, info=info, capturable=False)
    part.output = _Spoilable(runner.output)
    return part


def _choose(
    problem: Problem, direction: str, offered: list[race.Candidate], pin: str | None
) -> tuple[race.Candidate, dict[str, Any]]:
    if pin:
        match = next((c for c in offered if c.pin == pin), None)
        if match is None:
            names = ", ".join(c.pin for c in offered)
            raise Unsupported(
                f"the pinned oneDNN implementation '{pin}' is not offered for this {direction} convolution here "
                f"(oneDNN offers: {names})"[:500]
            )
        return match, {"chosen_by": f"pinned (--onednn-impl {pin})"}
    if problem.ctx.options.algorithm != "race":
        first = offered[0]
        return first, {
            "chosen_by": f"{first.algorithm}'s first implementation "
            f"(--onednn-algorithm {problem.ctx.options.algorithm})",
            "candidates": [{"candidate": c.pin, "rank": c.rank} for c in offered],
        }
    return _raced(problem, direction, offered)


def _raced(problem: Problem, direction: str, offered: list[race.Candidate]) -> tuple[race.Candidate, dict[str, Any]]:
    runners: dict[int, Runner] = {}

    def runner(c: race.Candidate) -> Runner:
        if c.rank not in runners:
            runners.clear()  # one candidate's tensors at a time
            runners[c.rank] = Runner(problem, direction, c.build)
        return runners[c.rank]

    def time_us(c: race.Candidate, out_of_contest_us: float) -> float:
        return race.quick_us(runner(c).run, out_of_contest_us)

    def check(c: race.Candidate) -> Check:
        r = runner(c)
        r.output.spoil(np.nan if r.problem.precision is not Precision.INT8 else 1)
        r.run()
        return r.check(c.algorithm == "convolution_winograd")

    try:  # race.NoCorrectCandidate (every implementation wrong) fails the kernel: a library error, not a gap
        choice = race.choose(offered, time_us, check)
    finally:
        runners.clear()
    return choice.chosen, choice.record()


class _Spoilable:
    """A part's output as the harness poisons it (kernels/inputs.py `poison`: `fill`) and the tests spoil it."""

    def __init__(self, placed: Placed) -> None:
        self.placed = placed
        self.dtype = np.dtype(np.int32 if placed.data_type == C.S32 else np.float32)

    def fill(self, value: float) -> None:
        self.placed.spoil(value)
