"""What cuSPARSELt's prune and prune check do with the harness's A (column-major k x m, op T), on a GPU:
for each prune rule and each starting value of the check's flag, the flag after the check and the
most nonzeros found in a group of four along k and along m. Run once when the 2:4 backend's check
disagrees with the library (kernels/backends/cusparselt/structured.py).

    python tests/benchmarks/cusparselt_probe.py
"""

from __future__ import annotations

import torch

from deepbench.kernels.backends.cusparselt.structured import Handle, StructuredProduct, library_version
from deepbench.kernels.precision import Precision

M, N, K = 256, 64, 512


def most_per_group(t: torch.Tensor) -> tuple[int, int]:
    """Most nonzeros in four consecutive values along k (rows of row-major m x k) and along m."""
    along_k = int((t.reshape(t.shape[0], -1, 4) != 0).sum(-1).max())
    along_m = int((t.t().reshape(t.shape[1], -1, 4) != 0).sum(-1).max())
    return along_k, along_m


def main() -> None:
    from nvmath.bindings import cusparseLt as lt

    handle = Handle(lt)
    print("cuSPARSELt", library_version(lt))
    for precision, dtype in ((Precision.FP16, torch.float16), (Precision.INT8, torch.int8)):
        a = (torch.randn(M, K, device="cuda") * 20).to(dtype)
        b = (torch.randn(N, K, device="cuda") * 20).to(dtype)
        d = torch.empty(N, M, device="cuda", dtype=torch.float16 if dtype == torch.float16 else torch.int32)
        product = StructuredProduct(lt, handle, a, b, d, precision)
        for rule in ("SPMMA_TILE", "SPMMA_STRIP"):
            pruned = torch.zeros_like(a)
            stream = torch.cuda.current_stream().cuda_stream
            lt.sp_mma_prune(handle.handle, product.matmul_descr, a.data_ptr(), pruned.data_ptr(),
                            int(getattr(lt.PruneAlg, rule)), stream)
            for start in (0, 1):
                flag = torch.full((1,), start, dtype=torch.int32, device="cuda")
                lt.sp_mma_prune_check(handle.handle, product.matmul_descr, pruned.data_ptr(), flag.data_ptr(), stream)
                print(f"{precision.value} {rule}: flag {start} -> {int(flag.item())}; most nonzeros of four "
                      f"along k, along m: {most_per_group(pruned)}")
        flag = torch.zeros(1, dtype=torch.int32, device="cuda")
        lt.sp_mma_prune_check(handle.handle, product.matmul_descr, a.data_ptr(), flag.data_ptr(), stream)
        print(f"{precision.value} unpruned A: flag 0 -> {int(flag.item())}")


if __name__ == "__main__":
    main()
