"""What a CUDA run records about its device: facts, library versions and measured ceilings.

Ceilings are measured, not taken from a datasheet: a large GEMM per precision (the rate the
library reaches on this card as it is clocked now) and a device-to-device copy. Each part's
roofline bound is then max(flops / peak, bytes / bandwidth), and pct_of_peak is that bound over
the measured time."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import torch

from ....precision import Precision
from ....results import Settings
from ....timing import cuda as cuda_timer
from ....timing.clocks import ClockReader
from ....timing.stopping import StopRule

CEILING_GEMM = 8192  # square GEMM size for the compute ceilings
COPY_BYTES = 1 << 30  # device-to-device copy of 1 GiB (read + write counted)
# Sustained, not first-burst, ceilings: samples for at least min_time_s (the power limiter settles).
CEILING_RULE = StopRule(target_rel_precision=0.01, min_samples=5, max_samples=200, time_cap_s=0.5, min_time_s=0.2)
CUBLAS_LIBS = ("libcublas.so.13", "libcublas.so.12", "libcublas.so")
CUBLASLT_LIBS = ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so")
CUBLAS_PROPERTIES = (0, 1, 2)  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL (libraryPropertyType)


def _load(names: tuple[str, ...]) -> Any:
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def cublas_version() -> str | None:
    """cuBLAS's own version (cublasGetProperty), from the library PyTorch loaded."""
    lib = _load(CUBLAS_LIBS)
    if lib is None:
        return None
    parts = []
    for prop in CUBLAS_PROPERTIES:
        value = ctypes.c_int()
        if lib.cublasGetProperty(prop, ctypes.byref(value)) != 0:
            return None
        parts.append(str(value.value))
    return ".".join(parts)


def cublaslt_version() -> str | None:
    lib = _load(CUBLASLT_LIBS)
    if lib is None:
        return None
    lib.cublasLtGetVersion.restype = ctypes.c_size_t
    v = int(lib.cublasLtGetVersion())
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}"


def driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # noqa: BLE001 - optional
        return None


def library_versions() -> dict[str, str]:
    out = {"torch": torch.__version__, "cuda_runtime": str(torch.version.cuda)}
    cudnn = torch.backends.cudnn.version()
    if cudnn:
        out["cudnn"] = str(cudnn)
    try:
        out["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
    except Exception:  # noqa: BLE001 - NCCL absent from this build
        pass
    for key, fn in (("cublas", cublas_version), ("cublaslt", cublaslt_version), ("driver", driver_version)):
        try:
            value = fn()
        except Exception:  # noqa: BLE001
            value = None
        if value:
            out[key] = value
    return out


def device_facts(device: torch.device, clocks: ClockReader) -> dict[str, Any]:
    p = torch.cuda.get_device_properties(device)
    facts: dict[str, Any] = {
        "kind": "cuda",
        "name": p.name,
        "memory_bytes": int(p.total_memory),
        "sm_count": p.multi_processor_count,
        "capability": f"{p.major}.{p.minor}",
        "l2_bytes": int(getattr(p, "L2_cache_size", 0) or 0),
        "uuid": str(getattr(p, "uuid", "")),
        "cudnn_benchmark": True,
    }
    facts.update(clocks.max_clocks())
    now = clocks.sm_mhz()
    if now:
        facts["sm_mhz_at_start"] = now
    return facts


# PyTorch's switch for fp16-accumulate half GEMMs (CUBLAS_COMPUTE_16F), from 2.7 on: the fp16acc16
# ceiling's GEMM (cuda_device.set_torch_precision_mode sets it).
FP16_ACCUMULATION = "allow_fp16_accumulation"


def _gemm_fn(precision: Precision, device: torch.device) -> Callable[[], object] | None:
    n = CEILING_GEMM
    g = torch.Generator(device=device)
    g.manual_seed(0)
    if precision is Precision.FP16ACC16 and not hasattr(torch.backends.cuda.matmul, FP16_ACCUMULATION):
        return None  # this PyTorch cannot ask for fp16 accumulate: no ceiling rather than fp16's under its name
    if precision in (Precision.FP32, Precision.TF32, Precision.FP16, Precision.FP16ACC16, Precision.BF16):
        half = (Precision.FP16, Precision.FP16ACC16)
        dtype = torch.float16 if precision in half else torch.bfloat16 if precision is Precision.BF16 else torch.float32
        a = torch.randn(n, n, device=device, generator=g).to(dtype)
        b = torch.randn(n, n, device=device, generator=g).to(dtype)
        out = torch.empty(n, n, device=device, dtype=dtype)
        return lambda: torch.mm(a, b, out=out)
    if precision is Precision.INT8:
        a = torch.randint(-64, 64, (n, n), device=device, dtype=torch.int8, generator=g)
        b = torch.randint(-64, 64, (n, n), device=device, dtype=torch.int8, generator=g).t().contiguous().t()
        return lambda: torch._int_mm(a, b)
    if precision is Precision.FP8 and fp8_supported(device):
        a = torch.randn(n, n, device=device, generator=g).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=device, generator=g).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return None


def fp8_supported(device: torch.device) -> bool:
    """cuBLASLt fp8 GEMM needs compute capability 8.9 (Ada) or 9.0+ (Hopper)."""
    return torch.cuda.get_device_capability(device) >= (8, 9) and hasattr(torch, "_scaled_mm")


def measure_ceilings(
    device: torch.device, settings: Settings, clocks: ClockReader, set_mode: Callable[[Precision], None]
) -> dict[str, float]:
    """tflops_<precision> for a CEILING_GEMM^3 GEMM and gbps_copy for a device-to-device copy."""
    out: dict[str, float] = {}
    hot = settings.model_copy(update={"cold": False, "verify_timing": False, "kernel_time": False, "energy": False})
    for precision in Precision:
        set_mode(precision)
        try:
            fn = _gemm_fn(precision, device)
            if fn is None:
                continue
            fn()
            m, _ = cuda_timer.measure(fn, CEILING_RULE, hot, True, device, clocks)
            out[f"tflops_{precision.value}"] = 2 * CEILING_GEMM**3 / (m.stats.median * 1e-6) / 1e12
        except Exception:  # noqa: BLE001 - a precision this card or build lacks has no ceiling
            continue
        finally:
            torch.cuda.empty_cache()
    out.update(_copy_gbps(device, hot, clocks))
    out["gbps_copy"] = max(out["gbps_memcpy"], out["gbps_elementwise"])
    torch.cuda.empty_cache()
    set_mode(Precision.FP32)
    return out


def _copy_gbps(device: torch.device, hot: Settings, clocks: cuda_timer.ClockReader) -> dict[str, float]:
    """Two copies: cudaMemcpyAsync (what Tensor.copy_ issues) and an element-wise kernel on the
    SMs, which reaches more of HBM's bandwidth on some parts; the roofline uses the faster. The
    buffers live only in here, so the caller's empty_cache() frees them."""
    src = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device=device).normal_()
    dst = torch.empty_like(src)
    out: dict[str, float] = {}
    for key, fn in (("gbps_memcpy", lambda: dst.copy_(src)), ("gbps_elementwise", lambda: torch.neg(src, out=dst))):
        fn()
        m, _ = cuda_timer.measure(fn, CEILING_RULE, hot, True, device, clocks)
        out[key] = 2 * COPY_BYTES / (m.stats.median * 1e-6) / 1e9
    return out


def roofline(
    flops: float, min_bytes: float, median_us: float, precision: Precision, ceilings: dict[str, float]
) -> dict[str, Any]:
    """The part's bound from the measured ceilings and the share of it the part reached."""
    peak = ceilings.get(f"tflops_{precision.value}")
    bw = ceilings.get("gbps_copy")
    bounds = {}
    if peak and flops:
        bounds["compute"] = flops / (peak * 1e12) * 1e6
    if bw and min_bytes:
        bounds["memory"] = min_bytes / (bw * 1e9) * 1e6
    if not bounds or median_us <= 0:
        return {}
    kind = max(bounds, key=bounds.__getitem__)
    return {"bound": kind, "bound_us": bounds[kind], "pct_of_peak": 100.0 * bounds[kind] / median_us}
