"""Package discovery for setuptools; everything else is in pyproject.toml.

The fixed top level (runner/, kernels/) is installed as `deepbench.runner` and `deepbench.kernels`
(pyproject.toml's package-dir). setuptools' `[tool.setuptools.packages.find]` returns names relative to
the folder it searches and cannot add that prefix, so the list is computed here: every folder under the
two trees that holds an `__init__.py` is installed, and a new backend cannot be left out of the images by
a forgotten entry in a hand-kept list.
"""

from setuptools import find_packages, setup

# Top-level folder -> the import name it is installed under (must agree with pyproject.toml's package-dir).
NAMESPACE = "deepbench"
TREES = ("runner", "kernels")


def deepbench_packages() -> list[str]:
    """Every package under the mapped trees, named as it is imported."""
    found = find_packages(include=[pattern for tree in TREES for pattern in (tree, f"{tree}.*")])
    return sorted(f"{NAMESPACE}.{name}" for name in found)


if __name__ == "__main__":  # as setuptools runs it; tests import the list without building
    setup(packages=deepbench_packages())
