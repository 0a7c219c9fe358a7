"""Diagnostics for the native backends on a GPU (issue 20): what cuDNN offers for an int8
convolution and which of its engines compute it correctly, how engine knobs round-trip, and how
cublasGemmEx compares with torch.mm on an unaligned k. Prints; changes nothing."""

from __future__ import annotations

import cudnn
import torch
from nvmath.bindings import cublas

from deepbench.kernels.backends.cudnn import graphs
from deepbench.kernels.backends.pytorch.checks import relative_error
from deepbench.kernels.backends.pytorch.context import TorchContext
from deepbench.kernels.backends.pytorch.conv import ConvSampler, padded_conv
from deepbench.kernels.catalog import by_id
from deepbench.kernels.padding import PadMode
from deepbench.kernels.precision import Precision


def gemm_nt_unaligned_k() -> None:
    import numpy as np
    import nvmath

    from deepbench.kernels.backends.cublas import gemm as g
    from deepbench.kernels.backends.pytorch.gemm import operands

    ctx = TorchContext(torch.device("cuda"), 0, PadMode.NONE)
    h = g.Handle(cublas)
    for k in (2561, 2568):
        m, n = 40, 8
        x, y = operands(ctx, m, n, k, False, True, torch.float16)
        c = torch.empty((n, m), dtype=torch.float16, device="cuda")
        one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
        t16 = int(nvmath.CudaDataType.CUDA_R_16F)
        cublas.gemm_ex(h.bind(), 0, 1, m, n, k, one.ctypes.data, y.data_ptr(), t16, m, x.data_ptr(), t16, n,
                       zero.ctypes.data, c.data_ptr(), t16, m, int(cublas.ComputeType.COMPUTE_32F), -1)
        ref = x.double() @ y.double()
        print(f"NT fp16 {m}x{n}x{k}: gemm_ex err {relative_error(c, ref):.3g}  torch.mm err "
              f"{relative_error(torch.mm(x, y), ref):.3g}  x strides {x.stride()} y strides {y.stride()}")


def int8_conv_engines() -> None:
    kernel = by_id()["conv/inference_server/000"]
    kk, padded = padded_conv(kernel, Precision.INT8, PadMode.DEEPBENCH)
    print("int8 conv", kernel.id, "padded", padded)
    ctx = TorchContext(torch.device("cuda"), 0)
    x = ctx.random((kk.n, kk.c, kk.h, kk.w), torch.int8).contiguous(memory_format=torch.channels_last)
    w = ctx.random((kk.k, kk.c, kk.r, kk.s), torch.int8).contiguous(memory_format=torch.channels_last)
    dy = ctx.random((kk.n, kk.k, kk.out_h, kk.out_w), torch.int8)
    sampler = ConvSampler(ctx, kk, x, w, dy)
    handle = cudnn.create_handle()
    cudnn.set_stream(handle=handle, stream=torch.cuda.current_stream().cuda_stream)
    for _ in (1,):
        g, roles = graphs.build(cudnn, handle, kk, Precision.INT8, "fwd")
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.B, cudnn.heur_mode.FALLBACK])
        n = g.get_execution_plan_count()
        print("plans:", n, "Y dtype", getattr(roles["y"], "data_type", None))
        ws = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        for i in range(n):
            y = graphs.tensor_for((kk.n, kk.k, kk.out_h, kk.out_w), torch.int32, True).zero_()
            try:
                notes = g.get_behavior_notes_for_plan_at_index(i)
            except Exception as exc:  # noqa: BLE001
                notes = f"? {exc}"
            try:
                g.build_plan_at_index(i)
                name = g.get_plan_name_at_index(i)
                g.execute_plan_at_index({roles["x"]: x, roles["w"]: w, roles["y"]: y}, ws, i, handle=handle)
                torch.cuda.synchronize()
                c = sampler.check_fwd(y, Precision.INT8)
                print(f"  {i:2d} {name:40s} notes={notes} error={c.error} sample y={y.flatten()[:4].tolist()}")
            except Exception as exc:  # noqa: BLE001
                print(f"  {i:2d} failed: {type(exc).__name__}: {str(exc)[:150]} notes={notes}")


def knob_round_trip() -> None:
    kernel = by_id()["conv/train/000"]
    ctx = TorchContext(torch.device("cuda"), 0)
    handle = cudnn.create_handle()
    for attempt in ("original", "by name"):
        g, _roles = graphs.build(cudnn, handle, kernel, Precision.FP16, "fwd")
        g.create_execution_plans([cudnn.heur_mode.A])
        g.build_plan_at_index(0)
        engine_id, knobs = g.get_engine_and_knobs_at_index(0)
        print("engine", engine_id,
              "knobs", {str(k): (v, type(k).__name__, getattr(k, "value", None)) for k, v in knobs.items()},
              "name", g.get_plan_name_at_index(0))
        g2, _ = graphs.build(cudnn, handle, kernel, Precision.FP16, "fwd")
        typed = knobs if attempt == "original" else {getattr(cudnn.knob_type, k.name): v for k, v in knobs.items()}
        try:
            g2.create_execution_plan(engine_id, typed)
            g2.build_plan_at_index(g2.get_execution_plan_count() - 1)
            print(attempt, "-> ok", g2.get_plan_name_at_index(g2.get_execution_plan_count() - 1))
        except Exception as exc:  # noqa: BLE001
            print(attempt, "-> failed:", str(exc)[:200])
    del ctx


if __name__ == "__main__":
    for step in (gemm_nt_unaligned_k, knob_round_trip, int8_conv_engines):
        try:
            step()
        except Exception:  # noqa: BLE001
            import traceback
            traceback.print_exc()
