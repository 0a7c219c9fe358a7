"""2:4 structured sparse GEMM on the torch backend: declined, with the reason.

The 2:4 product is cuSPARSELt's, called directly by the `cusparselt` backend (also chosen by
`nvidia`), so that the timed call is the library's own. A CPU has no sparse tensor cores and no
2:4 library here; on a GPU, PyTorch's semi-structured tensors would time PyTorch's dispatch
around cuSPARSELt or CUTLASS, another measurement than the suite's."""

from __future__ import annotations

from ...catalog import Sparse24GemmKernel
from ...precision import Precision
from ..contract.base import Prepared, Unsupported
from ..shared.torch_context import TorchContext

ON_CPU = (
    "2:4 structured sparsity runs on NVIDIA's sparse tensor cores through cuSPARSELt; no CPU library "
    "here runs it (on an NVIDIA GPU: --platform nvidia, or --backend cusparselt)"
)
ON_GPU = "the torch backend does not time 2:4 structured sparsity: cuSPARSELt is called directly (--backend cusparselt)"


def prepare(ctx: TorchContext, kernel: Sparse24GemmKernel, precision: Precision) -> Prepared:
    raise Unsupported(ON_GPU if ctx.is_cuda else ON_CPU)
