"""The reference layer: what every backend's results are checked against, shared by all of them.

A reference must not share the blind spot of the backend it checks: a check that called the
library under test, or that lived inside another backend and changed with it, could agree with a
wrong kernel. So the float64 references, the samplers that recompute chosen output elements from
their definition, the checks and their tolerances, and the builders of the operands they read live
here, apart from every backend, and import none (tests/test_backend_imports.py): a native backend
(cuBLAS, cuDNN, ...) reads the same reference as the PyTorch backend without importing it.

- verdicts.py: how an error or a count of wrong elements becomes a pass or a fail, for both kinds.
- torch_checks.py: checks of torch tensors in float64 (relative error, Freivalds, exact int8).
- numpy_checks.py: the same rules on numpy arrays, for the runtimes that hand them back (onnxruntime, LiteRT).
- layers.py: float64 numpy references of the layer benchmarks.
- conv.py: the convolution DeepBench ran (its padding) and the sampled float64 convolution checks.
- gemm.py: GEMM operands laid out as DeepBench's column-major matrices.
- int8_operands.py: the int8 operands of the inference runtimes' integer kernels.
- context.py: what the torch references need of a backend's context (a protocol, no backend).

The numpy modules import no PyTorch (a CPU board's runtimes run without it); the torch ones do.
"""
