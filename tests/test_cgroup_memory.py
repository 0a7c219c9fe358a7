"""The memory a harness may use is its cgroup's where that is lower than the machine's (a container's
`--memory`): read on recorded cgroup v1 and v2 trees, and used to size the CPU copy ceiling's buffers,
which on a host with a 480 MiB L3 once asked for 3.8 GB inside a 600 MiB container."""

from __future__ import annotations

import os
from pathlib import Path

from deepbench.kernels import system
from deepbench.kernels.backends.pytorch import cpu_ceilings

MIB = 2**20
V1_UNLIMITED = "9223372036854771712"
CONTAINER = "/docker/4f012c70"


def tree(root: Path, files: dict[str, str], cgroup: str) -> tuple[Path, Path]:
    """A cgroup mount under `root` holding `files` (path -> content), and a /proc/self/cgroup file."""
    mount = root / "cgroup"
    for name, text in files.items():
        (mount / name).parent.mkdir(parents=True, exist_ok=True)
        (mount / name).write_text(text + "\n")
    self_cgroup = root / "self_cgroup"
    self_cgroup.write_text(cgroup)
    return mount, self_cgroup


def test_a_v2_container_reads_its_own_limit_at_the_mounts_root(tmp_path):
    mount, me = tree(tmp_path, {"memory.max": str(600 * MIB)}, f"0::{CONTAINER}\n")
    assert system.cgroup_memory_limit_bytes(mount, me) == 600 * MIB


def test_a_v2_host_process_takes_the_tightest_limit_along_its_ancestors(tmp_path):
    mount, me = tree(
        tmp_path,
        {"jobs/memory.max": str(2048 * MIB), "jobs/run7/memory.max": "max", "other/memory.max": str(MIB)},
        "0::/jobs/run7\n",
    )
    assert system.cgroup_memory_limit_bytes(mount, me) == 2048 * MIB  # not the sibling's 1 MiB


def test_v1_reads_the_memory_controller_and_unlimited_stays_beyond_any_machine(tmp_path):
    v1 = f"4:memory:{CONTAINER}\n3:cpuset:/\n0::{CONTAINER}\n"
    mount, me = tree(tmp_path / "c", {"memory/memory.limit_in_bytes": str(600 * MIB)}, v1)
    assert system.cgroup_memory_limit_bytes(mount, me) == 600 * MIB
    mount, me = tree(tmp_path / "h", {"memory/memory.limit_in_bytes": V1_UNLIMITED}, "4:memory:/\n")
    assert system.cgroup_memory_limit_bytes(mount, me) == int(V1_UNLIMITED)


def test_no_limit_readable_is_none(tmp_path):
    mount, me = tree(tmp_path, {"memory.max": "max"}, "0::/\n")
    assert system.cgroup_memory_limit_bytes(mount, me) is None
    assert system.cgroup_memory_limit_bytes(tmp_path / "absent", tmp_path / "absent_self") is None


def test_usable_memory_is_the_lower_of_the_machines_and_the_cgroups(monkeypatch):
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit, usable in ((600 * MIB, 600 * MIB), (int(V1_UNLIMITED), physical), (None, physical)):
        monkeypatch.setattr(system, "cgroup_memory_limit_bytes", lambda limit=limit: limit)
        assert system.usable_memory_bytes() == usable


def test_the_copy_ceiling_fits_a_600_mib_container():
    gbps, copied = cpu_ceilings.copy_ceiling(600 * MIB)
    assert copied <= 600 * MIB // cpu_ceilings.COPY_MEMORY_FRACTION and gbps > 0
