"""The host's part of a run's provenance and system description, added to the harness's facts
before the runner writes the final run record (see kernels/provenance.py for what is hashed)."""

from __future__ import annotations

import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

from deepbench.kernels import __version__
from deepbench.kernels.provenance import merge_provenance, package_sha256, source_state
from deepbench.kernels.results import Plan, utcnow
from deepbench.kernels.system import collect_system

RUNNER_DIR = Path(__file__).resolve().parents[2]


def command_line() -> str:
    """The command as the user typed it (program name without its path)."""
    return shlex.join([os.path.basename(sys.argv[0]), *sys.argv[1:]])


def host_provenance(local: bool, command: str | None = None) -> dict[str, Any]:
    """What only the host knows: how the run was launched and from which source tree."""
    part: dict[str, Any] = {
        "tool_version": __version__,
        "runner_sha256": package_sha256(RUNNER_DIR),
        "local": local,
        "command": command or command_line(),
        "source": source_state(RUNNER_DIR).model_dump(mode="json"),
        "timestamps": {"recorded": utcnow().isoformat()},
        "python": {"runner": platform.python_version()},
    }
    if local:
        part["image"] = None  # no container: nothing but the source tree identifies the code
    return part


def with_host_facts(facts: dict[str, Any], plan: Plan, local: bool, command: str | None = None) -> dict[str, Any]:
    """The harness's facts plus the host's provenance and system description. Keys the harness
    or a container launcher already set (e.g. `image`) are kept unless the host knows better."""
    harness_part = dict(facts.get("provenance") or {})
    host_part = host_provenance(local, command)
    if not local:
        host_part.pop("image", None)
    out = dict(facts)
    out["provenance"] = merge_provenance(harness_part, host_part, {"seeds": {"inputs": plan.settings.seed}})
    out["host_system"] = collect_system().model_dump(mode="json")
    return out
