"""`deepbench submit --out DIR --force` replaces only a bundle deepbench submit wrote: aimed at the
run folder, its parent, the home folder or a folder with other files it exits 2 and every file
stays; a bundle is written beside its final name and renamed when complete, so a full disk leaves
no half bundle (issue 42)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import local_run, run_cli

RUN_ARGS = ("--suite", "smoke", "--fast", "--threads", "1", "--quiet", "--ops", "gemm")


@pytest.fixture(scope="module")
def made_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return local_run(tmp_path_factory.mktemp("run") / "smoke", *RUN_ARGS)


@pytest.fixture
def sandbox(made_run: Path, tmp_path: Path) -> Path:
    """tmp/parent/{run, notes.txt}: a run and a user's file beside it."""
    parent = tmp_path / "parent"
    parent.mkdir()
    shutil.copytree(made_run, parent / "run")
    (parent / "notes.txt").write_text("mine\n")
    return parent


def tree(root: Path) -> dict[str, str]:
    """Every file under `root` with its SHA-256 (what must stay in place)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def submit(run: Path, out: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = run_cli(
        "deepbench", "submit", str(run), "--out", str(out), "--submitter", "Lab", "--system-name", "VM", *extra, env=env
    )
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc


def written(proc: subprocess.CompletedProcess, bundle: Path) -> bool:
    """The bundle was written (0: it passes its check; 1: written, with problems its check names,
    e.g. a run from an uncommitted tree)."""
    assert proc.returncode in (0, 1) and (bundle / "MANIFEST.sha256").is_file(), proc.stdout + proc.stderr
    return True


def refused(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "error:" in lines[0], proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("target", ["run", "parent", "home", "grandparent"])
def test_force_never_replaces_the_run_its_parent_or_home(sandbox: Path, target: str) -> None:
    """The issue's case: --out the run's parent with --force deleted the run and a notes file."""
    top = sandbox.parent
    out = {"run": sandbox / "run", "parent": sandbox, "home": top, "grandparent": top}[target]
    before = tree(top)
    env = {"HOME": str(top)} if target == "home" else None
    refused(submit(sandbox / "run", out, "--force", env=env), "--force", "nothing was removed")
    assert tree(top) == before


def test_force_never_replaces_a_folder_with_other_files(sandbox: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    assert written(submit(sandbox / "run", bundle), bundle)
    (bundle / "mine.txt").write_text("not the tool's\n")
    before = tree(bundle)
    refused(submit(sandbox / "run", bundle, "--force"), "mine.txt", "did not write")
    assert tree(bundle) == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.txt").write_text("x")
    refused(submit(sandbox / "run", other, "--force"), "not a submission bundle")
    assert (other / "a.txt").read_text() == "x"


def test_force_replaces_a_bundle_it_wrote(sandbox: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    assert written(submit(sandbox / "run", bundle), bundle)
    refused(submit(sandbox / "run", bundle), "not empty", "--force")  # without --force: refused
    assert written(submit(sandbox / "run", bundle, "--force", "--notes", "second"), bundle)
    assert "second" in (bundle / "README.md").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "parent"]  # no partial, no old copy left


def test_full_disk_leaves_no_half_bundle(sandbox: Path, tmp_path: Path, root_or_skip: None) -> None:
    """A tmpfs with too few inodes for a bundle: the write fails with ENOSPC part way; the command
    says so in one line and nothing is left under the bundle's name nor beside it."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,nr_inodes=8", "tmpfs", str(disk)], check=True)
    try:
        proc = submit(sandbox / "run", disk / "bundle")
        assert proc.returncode == 74, proc.stdout + proc.stderr
        line = proc.stderr.strip()
        assert "\n" not in line and "no space left" in line and "nothing was written" in line, line
        assert list(disk.iterdir()) == []
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
