"""images/tools/local-base.sh when debootstrap fails with mounts left inside the new root (as it
did under a fork limit): the script must unmount them before it deletes anything, never delete
while a mount remains (a recursive delete would walk into the host's /proc, or through a bind
mount into host files), and leave no mount behind. debootstrap is replaced by a fake on PATH that
mounts proc and bind-mounts a host folder into the root, then fails. Needs root (mount)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import REPO

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 and not os.environ.get("CI"), reason="mounts need root (CI runs as root)"
)

SCRIPT = REPO / "images" / "tools" / "local-base.sh"
NAME = "deepbench-test/local-base-never-built:none"
FAKE_DEBOOTSTRAP = """#!/bin/sh
# A debootstrap that fails halfway, as the real one did: proc mounted in the target, and a bind
# mount of a host folder there (a worse case: deleting through it deletes host files).
for last; do :; done
echo "$last" > "$ROOT_RECORD"
mkdir -p "$last/proc" "$last/host" "$last/usr/bin"
echo partial > "$last/usr/bin/sh"
mount -t proc proc "$last/proc"
mount --bind "$HOST_DIR" "$last/host"
echo "W: Failure trying to run: chroot $last mount -t proc proc /proc (fork: Resource temporarily unavailable)"
exit 1
"""
FAILING_UMOUNT = '#!/bin/sh\necho "umount: $*: target is busy" >&2\nexit 32\n'


def _mounts_under(root: str) -> list[str]:
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p == root or p.startswith(root + "/")]


def _tree_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        h.update(str(p.relative_to(folder)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def _run(tmp_path: Path, *fakes: tuple[str, str]) -> tuple[subprocess.CompletedProcess, str, Path]:
    bindir, host = tmp_path / "bin", tmp_path / "host-files"
    bindir.mkdir()
    host.mkdir()
    (host / "precious.txt").write_text("a host file that must survive\n")
    (host / "sub").mkdir()
    (host / "sub" / "more.txt").write_text("and its folder\n")
    for name, text in (("debootstrap", FAKE_DEBOOTSTRAP), *fakes):
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    record = tmp_path / "root-used"
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "ROOT_RECORD": str(record), "HOST_DIR": str(host)}
    before = _tree_digest(host)
    proc = subprocess.run(["bash", str(SCRIPT), NAME], capture_output=True, text=True, env=env, timeout=120)
    assert _tree_digest(host) == before, "a host file was touched"
    return proc, record.read_text().strip(), host


def test_failing_debootstrap_leaves_no_mount_and_no_host_file_touched(tmp_path: Path) -> None:
    proc, root, host = _run(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Failure trying to run" in proc.stdout  # debootstrap's own reason is shown
    assert _mounts_under(root) == []
    assert not Path(root).exists() and not Path(root + ".log").exists()
    assert (host / "precious.txt").read_text() == "a host file that must survive\n"


def test_nothing_is_deleted_while_a_mount_remains(tmp_path: Path) -> None:
    """An unmount that fails (a fake umount): the root is left as it is, with a line saying why."""
    proc, root, host = _run(tmp_path, ("umount", FAILING_UMOUNT))
    try:
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert f"not deleting {root}: still mounted there" in proc.stderr
        assert Path(root, "usr", "bin", "sh").exists()  # nothing was deleted
        assert (host / "sub" / "more.txt").exists()
    finally:
        for mount in reversed(_mounts_under(root)):
            subprocess.run(["umount", mount], check=True)
        subprocess.run(["rm", "-rf", "--one-file-system", root, root + ".log"], check=True)
