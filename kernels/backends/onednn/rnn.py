"""Recurrent layers on oneDNN's RNN primitives, forward (training) and backward, one layer, one
direction, input size = hidden size as in DeepBench: vanilla_rnn with ReLU, vanilla_lstm (no
peepholes, no projection) and lbr_gru, oneDNN's "linear before reset" GRU, whose reset gate
multiplies (U_o h + b), the form of kernels/reference/rnn.py (cuDNN's and PyTorch's); oneDNN's
vanilla_gru applies the reset gate before the product and would be another layer.

What is timed, against DeepBench's rule: oneDNN's RNN primitive takes the layer's input x and
computes W x_t for every step inside the call, forward and backward, and cannot be handed the
projections instead; so the forward's time includes the input projection and its FLOPs count it
(declaration.py counts_input_projection). Its backward always computes the input gradient
(diff_src_layer) besides the weight gradients (W's and R's, and the bias's): the time includes
both, the FLOPs count the recurrent work and W's gradient (kernels/costs.py rnn_flops), not the
input gradient; the result's info says so. The backward runs on the workspace of one forward made
when the kernel is prepared; oneDNN accumulates weight gradients into its outputs (its backward
semantics: a training step's gradients add up), so timed calls accumulate and the check zeroes them
and runs once more.

Checks: the float64 recurrence of kernels/reference/rnn_numpy.py with the layer's own weights and
random initial states: every hidden state for fwd, the recurrent weight gradient dR for bwd
(the vanilla cell's ReLU masks from the library's forward), tolerances from precision.py's
recurrence rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...catalog import RnnKernel
from ...precision import Precision, recurrence_tolerance
from ...reference.numpy_checks import relative_error
from ...reference.rnn_numpy import Layer, recurrent_weight_gradient
from ...reference.verdicts import verdict
from ...results import Check
from ..contract.base import Prepared, TimedPart, Unsupported
from . import constants as C
from .binding import DnnlError
from .context import OnednnContext
from .objects import Attr, MemoryDesc, Primitive, PrimitiveDesc, created_pd, first_offered
from .tensors import PLAIN_TAGS, Placed, as_float, stored

GATES = {"vanilla": 1, "lstm": 4, "gru": 3}
DIFF = 128  # DNNL_ARG_DIFF_X = DNNL_ARG_X + 128 for every RNN argument
PRIMITIVES = {"vanilla": "vanilla_rnn (ReLU)", "lstm": "vanilla_lstm", "gru": "lbr_gru"}
WEIGHTS_ROLES = ("weights_layer", "weights_iter")
# Each cell's forward descriptor arguments in the order its create function takes them (None: absent)
FORWARD_ROLES: dict[str, tuple[str | None, ...]] = {
    "vanilla": ("src_layer", "src_iter", "weights_layer", "weights_iter", "bias", "dst_layer", "dst_iter"),
    "lstm": (
        "src_layer",
        "src_iter",
        "src_iter_c",
        "weights_layer",
        "weights_iter",
        None,  # peepholes
        None,  # projection
        "bias",
        "dst_layer",
        "dst_iter",
        "dst_iter_c",
    ),
    "gru": ("src_layer", "src_iter", "weights_layer", "weights_iter", "bias", "dst_layer", "dst_iter"),
}
ARGS = {
    "src_layer": C.ARG_SRC,
    "src_iter": C.ARG_SRC_ITER,
    "src_iter_c": C.ARG_SRC_ITER_C,
    "weights_layer": C.ARG_WEIGHTS,
    "weights_iter": C.ARG_WEIGHTS_ITER,
    "bias": C.ARG_BIAS,
    "dst_layer": C.ARG_DST,
    "dst_iter": C.ARG_DST_ITER,
    "dst_iter_c": C.ARG_DST_ITER_C,
}
INPUTS = ("src_layer", "src_iter", "src_iter_c", "weights_layer", "weights_iter", "bias")
NOTE = (
    "oneDNN's RNN primitive computes the input projection W x_t inside the call (timed, FLOPs counted); its "
    "backward also computes the input gradient diff_src_layer (timed, FLOPs not counted) besides the weight gradients"
)


@dataclass(frozen=True)
class RnnTypes:
    """oneDNN's data types: the layer's states and weights, the LSTM cell state, the bias and every gradient."""

    states: int
    cell: int
    bias: int
    gradients: int


# bf16: oneDNN's bf16 RNN keeps its bias and the LSTM cell state in f32, and its backward takes and gives every
# gradient in f32 (it has no bf16 backward with bf16 gradients: dnnl_*_backward_primitive_desc_create unimplemented).
TYPES = {Precision.FP32: RnnTypes(C.F32, C.F32, C.F32, C.F32), Precision.BF16: RnnTypes(C.BF16, C.F32, C.F32, C.F32)}


class Problem:
    """The layer's shapes, types, user-side values and descriptors."""

    def __init__(self, ctx: OnednnContext, kernel: RnnKernel, precision: Precision) -> None:
        self.ctx, self.kernel, self.precision = ctx, kernel, precision
        h, n, t, g = kernel.hidden, kernel.batch, kernel.timesteps, GATES[kernel.cell]
        self.hidden, self.gates = h, g
        bias_gates = g + 1 if kernel.cell == "gru" else g  # lbr_gru's extra bias, inside the reset gate
        base = {
            "src_layer": (t, n, h),
            "src_iter": (1, 1, n, h),
            "src_iter_c": (1, 1, n, h),
            "weights_layer": (1, 1, h, g, h),
            "weights_iter": (1, 1, h, g, h),
            "bias": (1, 1, bias_gates, h),
            "dst_layer": (t, n, h),
            "dst_iter": (1, 1, n, h),
            "dst_iter_c": (1, 1, n, h),
        }
        ty = TYPES[precision]
        kinds = {"src_iter_c": ty.cell, "dst_iter_c": ty.cell, "bias": ty.bias}
        self.shapes = {**base, **{f"diff_{r}": s for r, s in base.items()}}
        self.types = {r: kinds.get(r, ty.states) for r in base}
        self.types.update({f"diff_{r}": ty.gradients for r in base})
        self.mds = {
            r: MemoryDesc(ctx.lib, s, self.types[r], C.TAG_ANY if r.endswith(WEIGHTS_ROLES) else PLAIN_TAGS[len(s)])
            for r, s in self.shapes.items()
        }
        self.attr = Attr(ctx.lib)
        self.data = self._operands()

    def _operands(self) -> dict[str, np.ndarray]:
        ctx, p, scale = self.ctx, self.precision, self.hidden**-0.5
        raw = {r: ctx.floats(self.shapes[r], p, scale=scale if r in (*WEIGHTS_ROLES, "bias") else 1.0) for r in INPUTS}
        raw["diff_dst_layer"] = ctx.floats(self.shapes["dst_layer"], p)
        for r in ("diff_dst_iter", "diff_dst_iter_c"):  # the loss reads the layer's outputs h_t alone
            raw[r] = np.zeros(self.shapes[r], dtype=np.float32)
        return {r: as_float(stored(v, self.types[r]), self.types[r]) for r, v in raw.items()}

    def _mds(self, roles: tuple[str | None, ...]) -> list[Any]:
        return [self.mds[r].handle if r is not None and self._present(r) else None for r in roles]

    def _present(self, role: str) -> bool:
        return self.kernel.cell == "lstm" or not role.endswith("iter_c")

    def descriptor(self, backward: bool, hint: PrimitiveDesc | None = None) -> PrimitiveDesc:
        lib, cell, engine = self.ctx.lib, self.kernel.cell, self.ctx.engine.handle
        roles = FORWARD_ROLES[cell]
        if backward:
            roles = (*roles, *(None if r is None else f"diff_{r}" for r in roles))
        prop = C.BACKWARD if backward else C.FORWARD_TRAINING
        name = {"vanilla": "vanilla_rnn", "lstm": "lstm", "gru": "lbr_gru"}[cell]
        create = getattr(lib, f"dnnl_{name}_{'backward' if backward else 'forward'}_primitive_desc_create")
        head: list[Any] = [engine, prop, C.ELTWISE_RELU] if cell == "vanilla" else [engine, prop]
        tail: list[Any] = [C.RNN_FLAGS_UNDEF, 0.0, 0.0] if cell == "vanilla" else [C.RNN_FLAGS_UNDEF]
        tail += [hint.handle] if backward and hint is not None else []
        args = [*head, C.UNIDIRECTIONAL_LEFT2RIGHT, *self._mds(roles), *tail, self.attr.handle]
        pd = created_pd(
            lib, f"dnnl_{name}_{'backward' if backward else 'forward'}_primitive_desc_create", create, *args
        )
        pd.hint = hint
        return pd

    def layer(self, library_h: np.ndarray | None) -> Layer:
        """The float64 reference layer with these weights (oneDNN's ldigo: x @ W[:, g, :] per gate)."""
        d, h, g = self.data, self.hidden, self.gates
        w = d["weights_layer"].reshape(h, g * h).astype(np.float64)
        r = d["weights_iter"].reshape(h, g * h).astype(np.float64)
        b = d["bias"].reshape(-1, h).astype(np.float64)
        proj = d["src_layer"].astype(np.float64) @ w + b[:g].reshape(-1)
        masks = library_h > 0 if library_h is not None and self.kernel.cell == "vanilla" else None
        h0, c0 = d["src_iter"][0, 0], d["src_iter_c"][0, 0]
        return Layer(self.kernel.cell, proj, r, h0, c0, b[g] if self.kernel.cell == "gru" else None, masks)


class Runner:
    """The forward primitive (training: it writes the workspace) and the backward one on its outputs."""

    def __init__(self, problem: Problem, backward: bool) -> None:
        engine, cell = problem.ctx.engine, problem.kernel.cell
        self.problem = problem
        self.fwd_pd, self.offered = first_offered(problem.descriptor(False))
        roles = [r for r in FORWARD_ROLES[cell] if r is not None]
        self.tensors = {r: self._placed(r, self.fwd_pd) for r in roles}
        args = {ARGS[r]: self.tensors[r].memory for r in roles}
        self.workspace = _workspace(engine, self.fwd_pd)
        if self.workspace is not None:
            args[C.ARG_WORKSPACE] = self.workspace
        self.forward = Primitive(engine, self.fwd_pd, args)
        self.backward: Primitive | None = None
        if backward:
            self.backward = self._backward(roles, args)

    def _placed(self, role: str, pd: PrimitiveDesc) -> Placed:
        p = self.problem
        arg = ARGS[role.removeprefix("diff_")] + (DIFF if role.startswith("diff_") else 0)
        placed = Placed(p.ctx.engine, p.shapes[role], p.types[role], pd.md(C.QUERY_EXEC_ARG_MD, arg))
        if role in p.data:
            placed.fill(p.data[role])
        return placed

    def _backward(self, roles: list[str], forward_args: dict[int, Any]) -> Primitive:
        p = self.problem
        self.bwd_pd, offered = first_offered(p.descriptor(True, self.fwd_pd))
        self.offered_bwd = offered
        args = dict(forward_args)
        for r in WEIGHTS_ROLES:  # the backward may want its weights in another layout than the forward's
            self.tensors[f"bwd_{r}"] = self._placed(r, self.bwd_pd)
            args[ARGS[r]] = self.tensors[f"bwd_{r}"].memory
        for r in roles:
            diff = f"diff_{r}"
            self.tensors[diff] = self._placed(diff, self.bwd_pd)
            args[ARGS[r] + DIFF] = self.tensors[diff].memory
        self.forward.run()  # the workspace and outputs the backward reads
        return Primitive(p.ctx.engine, self.bwd_pd, args)

    def formats(self, pd: PrimitiveDesc) -> dict[str, str]:
        return {
            r: t.format
            for r, t in self.tensors.items()
            if r.endswith(WEIGHTS_ROLES) and (pd is self.fwd_pd) != r.startswith(("bwd_", "diff_"))
        }


def _workspace(engine: Any, pd: PrimitiveDesc) -> Any:
    from .objects import Memory, md_size

    md = pd.md(C.QUERY_WORKSPACE_MD)
    return Memory(engine, md, C.U8) if md and md_size(engine.lib, md) else None


def prepare(ctx: OnednnContext, kernel: RnnKernel, precision: Precision) -> Prepared:
    if precision not in TYPES:
        raise Unsupported(f"oneDNN's RNN primitives run fp32 and bf16 here; {precision.value} is not one of them")
    missing = ctx.missing_isa(precision)
    if missing:
        raise Unsupported(
            f"oneDNN's {precision.value} recurrent layers need {missing}; this CPU's ISA in oneDNN is {ctx.isa_name}"
        )
    problem = Problem(ctx, kernel, precision)
    directions = kernel.timed()
    try:
        runner = Runner(problem, "bwd" in directions)
    except DnnlError as exc:
        raise Unsupported(f"oneDNN has no {precision.value} {PRIMITIVES[kernel.cell]} primitive here: {exc}") from None
    parts = [_forward_part(runner)]
    if runner.backward is not None:
        parts.append(_backward_part(runner))
    info = {
        "input_projection_timed": True,
        "input_gradient_timed": runner.backward is not None,
        "flops_include_input_projection": True,
        "note": NOTE,
    }
    return Prepared(parts=parts, info=info)


def _record(runner: Runner, pd: PrimitiveDesc, mode: str) -> dict[str, Any]:
    ctx = runner.problem.ctx
    return {
        "library": "oneDNN",
        "primitive": PRIMITIVES[runner.problem.kernel.cell],
        "onednn": {
            "implementation": pd.impl,
            "chosen_by": "oneDNN's first implementation",
            "candidates": runner.offered if pd is runner.fwd_pd else runner.offered_bwd,
            "mode": mode,
            "formats": runner.formats(pd),
            **ctx.facts,
        },
    }


def _forward_part(runner: Runner) -> TimedPart:
    p = runner.problem
    kk, out = p.kernel, runner.tensors["dst_layer"]
    ref: dict[str, np.ndarray] = {}

    def check() -> Check:
        got = out.read().astype(np.float64)
        if "h" not in ref:
            ref["h"] = p.layer(None).forward()
        tol = recurrence_tolerance(p.precision, kk.hidden, kk.batch, kk.timesteps, "fwd")
        return verdict(relative_error(got, ref["h"]), p.precision, "reference-fp64", "every hidden state", tol=tol)

    part = TimedPart(
        "fwd",
        runner.forward.run,
        check,
        kk.flops("fwd", input_projection=True),
        kk.min_bytes("fwd", p.precision),
        info=_record(runner, runner.fwd_pd, "forward_training"),
        capturable=False,
    )
    part.output = _Output(out)
    return part


def _backward_part(runner: Runner) -> TimedPart:
    p = runner.problem
    kk = p.kernel
    assert runner.backward is not None
    backward = runner.backward
    d_r = runner.tensors["diff_weights_iter"]
    gradients = [runner.tensors[f"diff_{r}"] for r in (*WEIGHTS_ROLES, "bias")]

    def check() -> Check:
        """Zero the accumulated weight gradients, run once, and hold dR to the float64 recurrence's."""
        for g in gradients:
            g.spoil(0.0)
        backward.run()
        got = d_r.read().reshape(kk.hidden, -1).astype(np.float64)
        library_h = runner.tensors["dst_layer"].read().astype(np.float64)
        ref = recurrent_weight_gradient(p.layer(library_h), p.data["diff_dst_layer"].astype(np.float64))
        tol = recurrence_tolerance(p.precision, kk.hidden, kk.batch, kk.timesteps, "bwd")
        return verdict(relative_error(got, ref), p.precision, "reference-fp64", "recurrent weight gradient dR", tol=tol)

    record = _record(runner, runner.bwd_pd, "backward (data and weights)")
    record["onednn"]["accumulates"] = (
        "diff weights and bias accumulate over timed calls (oneDNN's RNN backward semantics); "
        "the check zeroes them first"
    )
    return TimedPart(
        "bwd",
        backward.run,
        check,
        kk.flops("bwd", input_projection=True),
        kk.min_bytes("bwd", p.precision),
        info=record,
        capturable=False,
    )


class _Output:
    """The forward's output as the harness poisons it (kernels/inputs.py `poison`)."""

    def __init__(self, placed: Placed) -> None:
        self.placed = placed
        self.dtype = np.dtype(np.float32)

    def fill(self, value: float) -> None:
        self.placed.spoil(value)
