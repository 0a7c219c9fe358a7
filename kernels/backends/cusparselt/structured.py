"""The 2:4 structured sparse product through cuSPARSELt: D (m x n) = A (m x k, 2:4 along k) B (k x n).

Layout: column-major throughout, as DeepBench's GEMMs; B (k x n, ldb = k) and C = D (m x n,
ldc = m) are DeepBench's operands, and A is stored k-contiguous (column-major k x m, op(A) = T),
so that each group of four along k lies together in memory: the TN layout that cuBLASLt's 8-bit
GEMMs also require, used for every type so that the types run the same problem. Sizes are padded
to cuSPARSELt's descriptor multiples (kernels/padding.py `structured_sparse_shape`).

Steps, each named in the error that a failing one raises: the descriptors (structured A with
CUSPARSELT_SPARSITY_50_PERCENT, dense B, C = D), the matmul descriptor, the default algorithm
selection and the plan; A pruned on the device (CUSPARSELT_PRUNE_SPMMA_TILE: in every 4 x 4 tile two
values of each row and of each column are kept, so A is 2:4 along k and along m; the 1 x 4 strip
rule prunes along k alone and passes too: cusparselt_probe.py at 9450c78) into a tensor of its
own, which the check multiplies; cusparseLtSpMMAPruneCheck must find it 2:4, and so must a count of
the nonzeros of every four along k; A compressed; the workspace allocated once;
cusparseLtMatmulSearch once, whose chosen configuration is recorded. The timed call is
`cusparseLtMatmul` alone, on torch's current stream, alpha = 1 and beta = 0 (host float32 scalars:
cuSPARSELt scales in float32 for every compute type, CUSPARSE_COMPUTE_32I included)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ... import padding
from ...catalog import Sparse24GemmKernel
from ...precision import INPUT_BYTES, Precision
from ...reference.torch_checks import check_matmul
from ..contract.base import Prepared, TimedPart, Unsupported
from ..gpu.cuda.native import StreamHandle
from .declaration import TYPES

if TYPE_CHECKING:
    from .backend import CusparseLtBackend

OUTPUT_DTYPE = {
    Precision.FP16: torch.float16,
    Precision.BF16: torch.bfloat16,
    Precision.INT8: torch.int32,
    Precision.FP8: torch.bfloat16,
}
FP8_DTYPE = torch.float8_e4m3fn
FP8_MIN_CAPABILITY = (9, 0)  # cuSPARSELt's e4m3 product: compute capability 9.0 and newer
# Why the other precisions are not run, in the words the result gives.
NOT_2OF4 = {
    Precision.FP32: "cuSPARSELt's fp32 product is 1:2 sparse, not 2:4 (the sparse tensor cores' 2:4 takes "
    "16- and 8-bit types)",
    Precision.TF32: "cuSPARSELt has no 2:4 tf32 product (its 32-bit sparsity is 1:2)",
}
ALIGNMENT_BYTES = 16  # of every operand's memory (torch allocates at 256 bytes)
PRUNE_ALGORITHM = "SPMMA_TILE"
GROUP, KEPT = 4, 2  # 2:4: at most two nonzeros in every four consecutive values along k
CALL = "cusparseLtMatmul"
# The layout the 2:4 product runs, as a GEMM's (a_t, b_t): A k-contiguous (TN). The dense GEMM beside it
# runs the same: cuBLAS's int8 tensor-core GEMM takes TN alone, and DeepBench's NN ran the server's int8
# GEMMs 10-12x slower on an H100 (runner/published/nvidia-h100/sparse-2of4, measured before this layout).
DENSE_LAYOUT = (True, False)


class CusparseLtCallError(RuntimeError):
    """A cuSPARSELt call failed: the message names the call and the library's status."""


class Handle(StreamHandle):
    """A cuSPARSELt handle and the one-stream array its calls take, kept on torch's current stream:
    cuSPARSELt takes the stream with every call, so `on_stream` only rewrites the array."""

    def __init__(self, lt: Any) -> None:
        super().__init__(call(lt, "cusparseLtInit", lt.init))
        self.lt = lt
        self.streams = np.zeros(1, dtype=np.uintp)

    def on_stream(self, stream: int) -> None:
        self.streams[0] = stream

    def __del__(self) -> None:
        try:
            self.lt.destroy(self.handle)
        except Exception:  # noqa: BLE001 - at interpreter exit the library may be gone first
            pass


def library_version(lt: Any) -> str:
    """cuSPARSELt's version, major.minor.patch (cusparseLtGetProperty, which needs no handle: a run
    that times no 2:4 kernel makes none)."""
    import nvmath

    kinds = nvmath.LibraryPropertyType
    parts = (lt.get_property(int(kind)) for kind in (kinds.MAJOR_VERSION, kinds.MINOR_VERSION, kinds.PATCH_LEVEL))
    return ".".join(str(p) for p in parts)


def call(lt: Any, name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args), a cuSPARSELt error raised again naming the call: a GPU log then says which step failed."""
    try:
        return fn(*args)
    except lt.cuSPARSELtError as exc:
        raise CusparseLtCallError(f"{name} failed: {exc}") from exc


def refused(exc: CusparseLtCallError) -> bool:
    """cuSPARSELt does not run this problem at all (as against a failure of a problem it takes)."""
    return "NOT_SUPPORTED" in str(exc)


class StructuredProduct:
    """D = op(A) B through cuSPARSELt with A compressed; owns its descriptors, plan and buffers."""

    def __init__(
        self,
        lt: Any,
        handle: Handle,
        a: torch.Tensor,
        b_store: torch.Tensor,
        d_store: torch.Tensor,
        precision: Precision,
    ) -> None:
        """The descriptors and the plan for A's shape (a: row-major m x k), B and D."""
        self._destroy: list[tuple[Callable[[int], None], int]] = []
        import nvmath
        from nvmath.bindings import cusparse

        self.lt, self.handle = lt, handle
        ab, cd, compute = TYPES[precision]
        ab_type, cd_type = int(getattr(nvmath.CudaDataType, ab)), int(getattr(nvmath.CudaDataType, cd))
        col = int(cusparse.Order.COL)
        op_t, op_n = int(cusparse.Operation.TRANSPOSE), int(cusparse.Operation.NON_TRANSPOSE)
        m, k = a.shape
        n = b_store.shape[0]
        self.alpha, self.beta = np.ones(1, dtype=np.float32), np.zeros(1, dtype=np.float32)
        self.b_store, self.d_store = b_store, d_store
        self._describe(m, n, k, ab_type, cd_type, col)
        self._plan(op_t, op_n, int(getattr(lt.ComputeType, compute)))
        self.compressed = self.compress_buffer = self.workspace = torch.empty(0, dtype=torch.uint8)

    def load(self, a: torch.Tensor, a_pruned: torch.Tensor) -> None:
        """Prune A into a_pruned, check it, compress it, allocate the workspace and let cuSPARSELt
        choose its configuration: everything before the first timed call."""
        self.prune(a, a_pruned)
        self.compressed, self.compress_buffer = self._check_and_compress(a_pruned)
        self.workspace = self._workspace()
        self.search()

    def _describe(self, m: int, n: int, k: int, ab_type: int, cd_type: int, col: int) -> None:
        """The matrices' descriptors: A column-major k x m (lda = k), op(A) = T; B k x n (ldb = k);
        C = D m x n (ldc = m)."""
        lt, h = self.lt, self.handle.handle
        self.mat_a = self._own(
            lt.mat_descriptor_destroy,
            call(
                lt,
                "cusparseLtStructuredDescriptorInit (A)",
                lt.structured_descriptor_init,
                h,
                k,
                m,
                k,
                ALIGNMENT_BYTES,
                ab_type,
                col,
                int(lt.Sparsity.SPARSITY_50_PERCENT),
            ),
        )
        self.mat_b = self._own(
            lt.mat_descriptor_destroy,
            call(
                lt,
                "cusparseLtDenseDescriptorInit (B)",
                lt.dense_descriptor_init,
                h,
                k,
                n,
                k,
                ALIGNMENT_BYTES,
                ab_type,
                col,
            ),
        )
        self.mat_c = self._own(
            lt.mat_descriptor_destroy,
            call(
                lt,
                "cusparseLtDenseDescriptorInit (C, D)",
                lt.dense_descriptor_init,
                h,
                m,
                n,
                m,
                ALIGNMENT_BYTES,
                cd_type,
                col,
            ),
        )

    def _plan(self, op_a: int, op_b: int, compute: int) -> None:
        """The matmul's descriptor, its algorithm selection (cuSPARSELt's default) and its plan."""
        lt, h = self.lt, self.handle.handle
        self.matmul_descr = self._own(
            lt.matmul_descriptor_destroy,
            call(
                lt,
                "cusparseLtMatmulDescriptorInit",
                lt.matmul_descriptor_init,
                h,
                op_a,
                op_b,
                self.mat_a,
                self.mat_b,
                self.mat_c,
                self.mat_c,
                compute,
            ),
        )
        self.alg_sel = self._own(
            lt.matmul_alg_selection_destroy,
            call(
                lt,
                "cusparseLtMatmulAlgSelectionInit",
                lt.matmul_alg_selection_init,
                h,
                self.matmul_descr,
                int(lt.MatmulAlg.DEFAULT),
            ),
        )
        self.plan = self._own(
            lt.matmul_plan_destroy,
            call(lt, "cusparseLtMatmulPlanInit", lt.matmul_plan_init, h, self.matmul_descr, self.alg_sel),
        )

    def _own(self, destroy: Callable[[int], None], ptr: int) -> int:
        """Remember how to free what the binding allocated (destroyed in reverse order)."""
        self._destroy.append((destroy, ptr))
        return ptr

    def prune(self, a: torch.Tensor, a_pruned: torch.Tensor) -> None:
        """a_pruned = A with two of every four along k zeroed (cusparseLtSpMMAPrune, strip rule)."""
        stream = torch.cuda.current_stream().cuda_stream
        call(
            self.lt,
            "cusparseLtSpMMAPrune",
            self.lt.sp_mma_prune,
            self.handle.handle,
            self.matmul_descr,
            a.data_ptr(),
            a_pruned.data_ptr(),
            int(getattr(self.lt.PruneAlg, PRUNE_ALGORITHM)),
            stream,
        )

    def _check_and_compress(self, a_pruned: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lt, h = self.lt, self.handle.handle
        stream = torch.cuda.current_stream().cuda_stream
        # Zeroed first: the check writes the flag only where it finds a group that breaks 2:4 (on an H100
        # with cuSPARSELt 0.8 a flag that started at 1 stayed 1 for a well pruned A: cusparselt_probe.py at 9450c78).
        invalid = torch.zeros(1, dtype=torch.int32, device=a_pruned.device)
        call(
            lt,
            "cusparseLtSpMMAPruneCheck",
            lt.sp_mma_prune_check,
            h,
            self.matmul_descr,
            a_pruned.data_ptr(),
            invalid.data_ptr(),
            stream,
        )
        flag = int(invalid.item())
        if flag != 0:  # 0: every group of four along k holds at most two nonzeros
            raise CusparseLtCallError(
                f"cusparseLtSpMMAPruneCheck: A is not 2:4 sparse after pruning (valid flag {flag})"
            )
        groups = (a_pruned.view(torch.uint8) if a_pruned.element_size() == 1 else a_pruned).reshape(
            a_pruned.shape[0], -1, GROUP
        )  # row-major m x k: the groups of four along k
        most = int((groups != 0).sum(dim=-1).max())
        if most > KEPT:
            raise CusparseLtCallError(f"cusparseLtSpMMAPrune left {most} nonzeros in a group of four along k")
        size, buffer_size = call(lt, "cusparseLtSpMMACompressedSize", lt.sp_mma_compressed_size, h, self.plan)
        compressed = torch.empty(max(int(size), 1), dtype=torch.uint8, device=a_pruned.device)
        buffer = torch.empty(max(int(buffer_size), 1), dtype=torch.uint8, device=a_pruned.device)
        call(
            lt,
            "cusparseLtSpMMACompress",
            lt.sp_mma_compress,
            h,
            self.plan,
            a_pruned.data_ptr(),
            compressed.data_ptr(),
            buffer.data_ptr(),
            stream,
        )
        return compressed, buffer

    def _workspace(self) -> torch.Tensor:
        size = int(
            call(self.lt, "cusparseLtMatmulGetWorkspace", self.lt.matmul_get_workspace, self.handle.handle, self.plan)
        )
        return torch.empty(max(size, 1), dtype=torch.uint8, device=self.d_store.device)

    def _args(self) -> tuple[Any, ...]:
        h = self.handle.bind()  # first: it points the stream array at torch's current stream
        return (
            h,
            self.plan,
            self.alpha.ctypes.data,
            self.compressed.data_ptr(),
            self.b_store.data_ptr(),
            self.beta.ctypes.data,
            self.d_store.data_ptr(),
            self.d_store.data_ptr(),
            self.workspace.data_ptr(),
            self.handle.streams.ctypes.data,
            1,
        )

    def search(self) -> None:
        """cusparseLtMatmulSearch: cuSPARSELt times its configurations and sets the fastest in the
        plan; the workspace is re-read, since a configuration with split-k may need more."""
        call(self.lt, "cusparseLtMatmulSearch", self.lt.matmul_search, *self._args())
        needed = int(
            call(self.lt, "cusparseLtMatmulGetWorkspace", self.lt.matmul_get_workspace, self.handle.handle, self.plan)
        )
        if needed > self.workspace.numel():
            self.workspace = torch.empty(needed, dtype=torch.uint8, device=self.d_store.device)

    def algorithm(self) -> dict[str, Any]:
        """The configuration the plan runs (CUSPARSELT_MATMUL_ALG_CONFIG_ID), and split-k where readable."""
        out: dict[str, Any] = {}
        for key, attribute in (("config_id", "CONFIG_ID"), ("config_max_id", "CONFIG_MAX_ID"), ("split_k", "SPLIT_K")):
            attr = getattr(self.lt.MatmulAlgAttribute, attribute)
            value = np.zeros(1, dtype=self.lt.get_matmul_alg_attribute_dtype(attr))
            try:
                self.lt.matmul_alg_get_attribute(
                    self.handle.handle, self.alg_sel, int(attr), value.ctypes.data, value.itemsize
                )
            except self.lt.cuSPARSELtError as exc:
                out[key] = f"unreadable: {exc}"
                continue
            out[key] = int(value[0])
        return out

    def __call__(self) -> None:
        self.lt.matmul(*self._args())

    def first_call(self) -> None:
        """The first call, its error named (the timed calls are the bare library call)."""
        call(self.lt, CALL, self.lt.matmul, *self._args())

    def __del__(self) -> None:
        for destroy, ptr in reversed(self._destroy):
            try:
                destroy(ptr)
            except Exception:  # noqa: BLE001 - at exit the library may be gone; an older one lacks a destroy
                pass


def operand(ctx: Any, shape: tuple[int, int], precision: Precision) -> torch.Tensor:
    """Random inputs in the precision's storage type (fp8: normal values rounded to e4m3)."""
    if precision is Precision.FP8:
        return ctx.random(shape, torch.float32, narrow=True).to(FP8_DTYPE)
    return ctx.random(shape, ctx.dtype(precision))


def require(ctx: Any, precision: Precision) -> None:
    """Unsupported, with the reason, for a precision cuSPARSELt has no 2:4 product in here."""
    if precision in NOT_2OF4:
        raise Unsupported(NOT_2OF4[precision])
    if precision not in TYPES:
        raise Unsupported(f"cuSPARSELt has no 2:4 product in {precision.value}")
    if precision is Precision.FP8 and torch.cuda.get_device_capability(ctx.device) < FP8_MIN_CAPABILITY:
        raise Unsupported("cuSPARSELt's fp8 (e4m3) 2:4 product needs compute capability 9.0 or newer")


def prepare(backend: CusparseLtBackend, kernel: Sparse24GemmKernel, precision: Precision) -> Prepared:
    ctx = backend.ctx
    require(ctx, precision)
    listed = {"m": kernel.m, "n": kernel.n, "k": kernel.k}
    aligned = padding.structured_sparse_shape(kernel.m, kernel.n, kernel.k, INPUT_BYTES[precision])
    shape = padding.resolve(ctx.pad, listed, aligned)
    m, n, k = shape["m"], shape["n"], shape["k"]
    lt = backend.lib
    assert lt is not None, "prepare runs only where the binding loaded"
    a = operand(ctx, (m, k), precision)  # row-major m x k = column-major k x m
    a_pruned = torch.empty_like(a)
    b_store = operand(ctx, (n, k), precision)  # column-major k x n (ldb = k)
    d_store = torch.empty((n, m), dtype=OUTPUT_DTYPE[precision], device=ctx.device)  # column-major m x n (ldc = m)
    try:
        product = StructuredProduct(lt, backend.handle, a, b_store, d_store, precision)
        product.load(a, a_pruned)
        product.first_call()
    except CusparseLtCallError as exc:
        if refused(exc) or (shape != aligned and "INVALID_VALUE" in str(exc)):
            raise Unsupported(
                f"cuSPARSELt refuses this {precision.value} problem (m={m}, n={n}, k={k}): {exc}"
            ) from None
        raise
    del a  # only the pruned A is multiplied, and checked against
    ab, cd, compute = TYPES[precision]
    wide = precision is Precision.FP8  # the float64 reference reads float8 through float32
    x, y = (b_store.float(), a_pruned.float().t()) if wide else (b_store, a_pruned.t())
    # d_store holds D^T row-major: D^T = B^T op(A)^T, with b_store = B^T and a_pruned = op(A) row-major.
    part = TimedPart(
        "fwd",
        product,
        lambda: check_matmul(d_store, x, y, precision, ctx.generator),
        kernel.flops(),
        kernel.min_bytes("fwd", precision),
        info={
            "library": "cuSPARSELt",
            "call": CALL,
            "sparsity": "2:4 (50%)",
            "layout": {
                "a": f"column-major {k} x {m}, op T (k-contiguous)",
                "b": f"column-major {k} x {n}",
                "d": f"column-major {m} x {n}",
                "m": m,
                "n": n,
                "k": k,
            },
            "types": f"A/B {ab}, C/D {cd}, CUSPARSE_{compute}",
            "prune": f"CUSPARSELT_PRUNE_{PRUNE_ALGORITHM} on the device, checked 2:4 by cusparseLtSpMMAPruneCheck",
            "algorithm": {
                "selection": "CUSPARSELT_MATMUL_ALG_DEFAULT, then cusparseLtMatmulSearch",
                **product.algorithm(),
            },
            "workspace_bytes": int(product.workspace.numel()),
            "compressed_bytes": int(product.compressed.numel()),
            "compress_buffer_bytes": int(product.compress_buffer.numel()),
            "alpha": 1,
            "beta": 0,
        },
        output=d_store,
    )
    return Prepared(parts=[part], padding=padding.changed(listed, shape))
