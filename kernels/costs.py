"""FLOP and byte counts for every operation, written down in one place.

Conventions (used by every backend and report, so that throughput figures are comparable):
- A multiply-add counts as 2 FLOPs, as in DeepBench (TFLOPS = 2*M*N*K / time for GEMM).
- "Fewest bytes" is what a kernel must move through device memory at least: each input read
  once, each output written once, at the element size of the precision. It is the lower bound
  used for the roofline; real kernels move more.
- Backward passes (convolution, RNN) count what the direction computes:
  * convolution backward-data and backward-filter each cost the same FLOPs as forward
    (one multiply-add per filter tap and output element); bytes: backward-data reads dY and W
    and writes dX; backward-filter reads dY and X and writes dW.
  * RNN forward counts the recurrent GEMMs h_{t-1} R^T for every timestep plus the gate
    element-wise work is ignored (it is O(hidden) per step, negligible); the input projection
    W x_t is excluded, following DeepBench. RNN backward counts the recurrent data gradient
    (dh_{t-1} = dgates R) and the weight gradient (dR += dgates^T h_{t-1}): twice the forward.
- Sparse GEMM counts the useful work of the sparse product, 2*nnz(A)*N, and the dense
  equivalent 2*M*N*K is reported beside it.
- 2:4 structured sparse GEMM counts the products actually made, as the sparse rule does: half of
  A's entries are zero, so 2*(M*K/2)*N; its fewest bytes are the compressed A (the kept half
  and 2 bits of position metadata per kept value), B and C.
- All-reduce moves S = floats*4 bytes; algorithm and bus bandwidth follow nccl-tests.
"""

from __future__ import annotations

# Gates per cell type: vanilla has one affine map, LSTM four (i, f, g, o), GRU three (r, z, n).
GATES = {"vanilla": 1, "lstm": 4, "gru": 3}
FLOPS_PER_MAC = 2
FLOAT32_BYTES = 4


def gemm_flops(m: int, n: int, k: int) -> float:
    return float(FLOPS_PER_MAC) * m * n * k


def gemm_bytes(m: int, n: int, k: int, in_bytes: float, out_bytes: float) -> float:
    return (m * k + k * n) * in_bytes + m * n * out_bytes


def conv_output_size(size: int, filt: int, pad: int, stride: int) -> int:
    return (size + 2 * pad - filt) // stride + 1


def conv_flops(n: int, c: int, k: int, r: int, s: int, out_h: int, out_w: int) -> float:
    """Forward convolution FLOPs; backward-data and backward-filter cost the same."""
    return float(FLOPS_PER_MAC) * n * k * out_h * out_w * c * r * s


def conv_bytes(direction: str, x: int, w: int, y: int, elem: float) -> float:
    """x, w, y: element counts of input, filter and output."""
    moved = {"fwd": x + w + y, "bwd_data": y + w + x, "bwd_filter": y + x + w}[direction]
    return moved * elem


def rnn_flops(
    direction: str, cell: str, hidden: int, batch: int, timesteps: int, input_projection: bool = False
) -> float:
    """Recurrent FLOPs; with `input_projection` (libraries such as cuDNN that cannot leave it
    out) add W x_t for every step forward and its weight gradient backward (no input gradient)."""
    recurrent = float(FLOPS_PER_MAC) * GATES[cell] * hidden * hidden * batch * timesteps
    projection = recurrent if input_projection else 0.0
    return recurrent + projection if direction == "fwd" else 2 * recurrent + projection


def rnn_bytes(direction: str, cell: str, hidden: int, batch: int, timesteps: int, elem: float) -> float:
    gates = GATES[cell]
    weights = gates * hidden * hidden
    # Forward: reads R and the precomputed input projections, writes every hidden state.
    states = timesteps * batch * hidden
    fwd = weights + timesteps * batch * gates * hidden + states
    if direction == "fwd":
        return fwd * elem
    # Backward: reads R, the saved states and dH, writes dR.
    return (2 * weights + 2 * states + timesteps * batch * gates * hidden) * elem


def sparse_gemm_flops(m: int, n: int, k: int, sparsity: float) -> float:
    nnz = round(m * k * (1.0 - sparsity))
    return float(FLOPS_PER_MAC) * nnz * n


def sparse_gemm_bytes(m: int, n: int, k: int, sparsity: float, elem: float, index_bytes: int = 4) -> float:
    nnz = round(m * k * (1.0 - sparsity))
    return nnz * (elem + index_bytes) + (m + 1) * index_bytes + k * n * elem + m * n * elem


# 2:4 sparsity keeps two values of every four along k; each kept value's position in its group
# of four takes 2 bits of metadata.
STRUCTURED_SPARSITY = 0.5
STRUCTURED_METADATA_BITS = 2
BITS_PER_BYTE = 8


def structured_sparse_gemm_bytes(m: int, n: int, k: int, in_bytes: float, out_bytes: float) -> float:
    """Compressed A (kept values and their metadata), dense B (k x n) and C (m x n)."""
    kept = m * k * (1.0 - STRUCTURED_SPARSITY)
    return kept * (in_bytes + STRUCTURED_METADATA_BITS / BITS_PER_BYTE) + k * n * in_bytes + m * n * out_bytes


def all_reduce_bytes(floats: int) -> float:
    return float(floats * FLOAT32_BYTES)


def bus_bandwidth_factor(ranks: int) -> float:
    """nccl-tests: busBw = algBw * 2(n-1)/n for all-reduce."""
    return 2.0 * (ranks - 1) / ranks if ranks > 1 else 0.0
