"""What several backends compose, below all of them: operands in PyTorch memory (torch_context.py), a backend
that routes each operation to another by its declaration (router.py), and the dense GEMM timed beside a
sparse one (dense_beside.py). Nothing here imports a backend."""
