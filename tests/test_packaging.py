"""Package discovery (setup.py): every package under runner/ and kernels/ is installed, under the
`deepbench.` name pyproject.toml maps it to, so a new backend cannot be left out of the images."""

from __future__ import annotations

import runpy
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
NOT_CODE = {"__pycache__"}
DATA_ONLY = ("runner/published",)  # results shipped for the reports: data, not packages


def _setup() -> dict:
    return runpy.run_path(str(REPO / "setup.py"), run_name="setup")  # not "__main__": nothing is built


def test_the_trees_are_the_ones_pyproject_maps() -> None:
    setup = _setup()
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    assert package_dir == {f"{setup['NAMESPACE']}.{tree}": tree for tree in setup["TREES"]}
    assert "packages" not in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_folder_of_code_is_an_installed_package() -> None:
    """A folder of modules without __init__.py would be skipped silently: each one is a package."""
    setup = _setup()
    packages = set(setup["deepbench_packages"]())
    for tree in setup["TREES"]:
        for folder in [REPO / tree, *(p for p in (REPO / tree).rglob("*") if p.is_dir())]:
            rel = folder.relative_to(REPO).as_posix()
            if NOT_CODE & set(folder.parts) or rel.startswith(DATA_ONLY) or not any(folder.glob("*.py")):
                continue
            assert (folder / "__init__.py").is_file(), f"{rel} holds modules but no __init__.py"
            assert f"{setup['NAMESPACE']}.{rel.replace('/', '.')}" in packages, rel
    assert "deepbench.kernels.backends.cudnn" in packages and "deepbench.runner.submission" in packages
