"""DeepBench's kernels, the result model, and the harness that runs them (`deepbench.kernels`).

Everything here except `harness`, `backends` and the torch checks of `reference` imports without
PyTorch, so the host side (`deepbench.runner`) can load the catalog and validate results on a
machine that has none.
"""

__version__ = "0.1.0"

from . import catalog  # noqa: F401
