"""What `deepbench check` reads ships with the package (issue 54): the index of published runs that
--strict reads (runner/data/published_ok.json.gz) is what runner/published holds, and an installed
checker (a wheel of this tree, imported from where pip put it) gives the verdict a checkout gives,
on a real bundle and on one whose `unsupported` result a published run contradicts; both compute
the same source hashes (a hash over a checkout's runner/published once made an installed checker
refuse every checkout's run)."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from deepbench.kernels.provenance import sha256_file
from deepbench.runner.errors import UserError
from deepbench.runner.submission import published_ok
from deepbench.runner.submission.manifest import write_manifest

from .conftest import REPO, local_bundle

# What a wheel is built from: the packaging and the two trees, runner/published included (the wheel
# must leave it out by the package's own rules, not by this copy).
WHEEL_SOURCE = ("pyproject.toml", "setup.py", "README.md", "runner", "kernels")
NOT_SOURCE = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
PIP_TIMEOUT_S = 600
CHECK_TIMEOUT_S = 300
# The published run arm-emulated/torch-gemm-conv (platform arm, backend torch) measured the first gemm of
# inference-device with n=1 `ok`; a local torch run of the same selection holds that kernel, and its
# bundle, moved to platform arm with the kernel turned `unsupported`, is what that run contradicts.
CONTRADICTED = ("arm", "torch", "gemm/inference_device/002/fp32")
RUN_ARGS = ("--backend", "torch", "--suite", "inference-device", "--ops", "gemm", "--where", "n=1", "--limit", "1")
FAST_ARGS = ("--precision", "fp32", "--fast", "--threads", "1", "--quiet")
# A reason the torch backend's code gives (kernels/backends/pytorch): a plain check accepts it.
TORCH_REASON = "fp32 is not available through PyTorch on cpu"
# What a subprocess prints about the deepbench it imported: where from, and the hashes it computes.
WHO = (
    "import json, deepbench.kernels as k, deepbench.runner.submission.semantics as s; "
    "from deepbench.runner.submission.checker import own_hashes; "
    "print(json.dumps({'kernels': k.__file__, 'semantics': s.__file__, **own_hashes()}))"
)


def test_the_shipped_index_is_what_runner_published_holds() -> None:
    """The index cannot drift: a published run added, removed or changed without remaking it fails."""
    assert published_ok.PUBLISHED.is_dir(), "runner/published is part of a checkout"
    made = published_ok.build()
    assert made == published_ok.shipped(), (
        f"{published_ok.INDEX_NAME} differs from what runner/published holds: remake it with "
        f"{published_ok.WRITE_COMMAND}"
    )
    assert made[CONTRADICTED[0]][CONTRADICTED[1]][CONTRADICTED[2]] == "arm-emulated/torch-gemm-conv"


def test_the_index_is_package_data() -> None:
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    rel = published_ok.INDEX_PATH.relative_to(REPO / "runner").as_posix()
    assert any(fnmatch.fnmatch(rel, p) for p in patterns[published_ok.PACKAGE]), (rel, patterns)


def test_the_index_round_trips_and_refuses_other_bytes() -> None:
    ok = {"arm": {"torch": {"gemm/inference_device/002/fp32": "arm-emulated/torch-gemm-conv"}}}
    assert published_ok.decode(published_ok.encode(ok)) == ok
    assert published_ok.encode(ok) == published_ok.encode(json.loads(json.dumps(ok)))  # same runs, same bytes
    for damaged in (b"not gzip", published_ok.encode(ok)[:-9]):
        with pytest.raises(ValueError, match="--write"):
            published_ok.decode(damaged)


def test_a_published_run_that_cannot_be_read_is_an_error(tmp_path: Path) -> None:
    """An index that silently left a run out would let --strict pass what that run contradicts."""
    (tmp_path / "some-run").mkdir()
    (tmp_path / "some-run" / "plan.json").write_text("{not json")
    with pytest.raises(UserError, match="some-run"):
        published_ok.build(tmp_path)
    with pytest.raises(UserError, match="source checkout"):
        published_ok.build(tmp_path / "absent")


def _contradicted(bundle: Path, dst: Path) -> Path:
    """A copy of the bundle on platform arm whose one result is `unsupported` with a reason its backend
    gives, made consistent as a careful forger would (counts, plan hash, manifest)."""
    shutil.copytree(bundle, dst)
    docs = {name: json.loads((dst / name).read_text()) for name in ("plan.json", "run.json", "submission.json")}
    for doc in docs.values():
        doc["platform"] = CONTRADICTED[0]
    results = [json.loads(x) for x in (dst / "results.jsonl").read_text().splitlines() if x.strip()]
    (r,) = results
    assert r["id"] == CONTRADICTED[2] and r["backend"] == CONTRADICTED[1], r["id"]
    blank = dict(parts=[], flags=[], time_us=None, tflops=None, gbps=None, check=None)
    r.update(status="unsupported", reason=TORCH_REASON, **blank)
    docs["run.json"]["counts"] = {"unsupported": 1}
    (dst / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in results))
    (dst / "plan.json").write_text(json.dumps(docs["plan.json"], indent=1) + "\n")
    docs["run.json"]["plan_sha256"] = sha256_file(dst / "plan.json")
    for name in ("run.json", "submission.json"):
        (dst / name).write_text(json.dumps(docs[name], indent=1) + "\n")
    write_manifest(dst)
    return dst


def _installed(tmp: Path) -> Path:
    """A wheel of this tree (pip wheel --no-deps, as a user's pip builds it), installed into a folder of
    its own (pip install --no-deps --target): what an installation of this version holds."""
    src = tmp / "src"
    src.mkdir(parents=True)
    for item in WHEEL_SOURCE:
        if (REPO / item).is_dir():
            shutil.copytree(REPO / item, src / item, ignore=NOT_SOURCE)
        else:
            shutil.copy2(REPO / item, src / item)
    _pip("wheel", "--no-deps", "-w", str(tmp / "wheel"), str(src))
    (wheel,) = (tmp / "wheel").glob("*.whl")
    _pip("install", "--no-deps", "--target", str(tmp / "site"), str(wheel))
    return tmp / "site"


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _python(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=CHECK_TIMEOUT_S)


@pytest.mark.slow
def test_an_installed_checker_judges_as_the_checkout_does(tmp_path: Path) -> None:
    bundle = local_bundle(tmp_path / "made", *RUN_ARGS, *FAST_ARGS)
    forged = _contradicted(bundle, tmp_path / "contradicted")
    site = _installed(tmp_path / "wheel")
    checkout_env = dict(os.environ)
    installed_env = {**os.environ, "PYTHONPATH": str(site)}  # the wheel's copy first, the checkout's nowhere

    who = {}
    for name, env in (("checkout", checkout_env), ("installed", installed_env)):
        proc = _python(env, "-c", WHO)
        assert proc.returncode == 0, proc.stderr
        who[name] = json.loads(proc.stdout)
    for key in ("kernels", "semantics"):
        assert Path(who["installed"][key]).is_relative_to(site), who
        assert Path(who["checkout"][key]).resolve().is_relative_to(REPO), who
    assert not (site / "deepbench" / "runner" / "published").exists(), "runner/published is not package data"
    for key in ("harness_sha256", "runner_sha256"):
        assert who["installed"][key] == who["checkout"][key], f"{key}: an install and a checkout hash differently"

    # --allow-modified: the verdicts must agree whether or not this tree has uncommitted changes
    for path in (bundle, forged):
        for strict in ((), ("--strict",)):
            args = ("-m", "deepbench.runner.cli", "check", str(path), "--allow-modified", *strict)
            checkout, installed = _python(checkout_env, *args), _python(installed_env, *args)
            assert "Traceback" not in checkout.stderr + installed.stderr, checkout.stderr + installed.stderr
            assert (installed.returncode, installed.stdout) == (checkout.returncode, checkout.stdout), (
                f"{path.name} {strict}: installed (exit {installed.returncode}):\n{installed.stdout}\n"
                f"checkout (exit {checkout.returncode}):\n{checkout.stdout}"
            )
            if path == forged:
                assert checkout.returncode == (1 if strict else 0), checkout.stdout
                contradicted = f"{CONTRADICTED[2]}: is unsupported, but this tool's published run"
                assert contradicted in checkout.stdout and "arm-emulated/torch-gemm-conv" in checkout.stdout, (
                    checkout.stdout
                )
