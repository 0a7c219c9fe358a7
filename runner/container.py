"""The harness in the platform's container: a HarnessProcess (see supervise.py) over the docker SDK.

The container sees only two host paths: the plan, read-only, at /plan/plan.json, and the results
folder, writable, at /results. Its root filesystem is read-only (scratch space is a tmpfs /tmp),
it has no network, no capabilities, and runs as the owner of the results folder, so what it
writes belongs to whoever owns that folder. It reaches the devices its platform names: NVIDIA
GPUs through a device request (the NVIDIA container toolkit), ROCm's /dev/kfd and /dev/dri with
the video group, an Intel GPU's /dev/dri when the host has one, nothing for CPUs.

The harness prints one JSON event per line on stdout (streamed to the supervisor); its stderr is
appended to OUTDIR/harness.log when it exits. An init process (docker's tini) is PID 1, so a
kernel that kills the harness (a crash, the out-of-memory killer) ends the container with the
harness's signal status, which the supervisor records as that kernel's failure before it starts
a new container for the rest."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from . import images
from .docker_client import LOCAL_HINT, connect
from .emulation import container_additions
from .errors import UserError
from .local import LOG_FILE
from .platforms import Platform

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

PLAN_IN_CONTAINER = "/plan/plan.json"
RESULTS_IN_CONTAINER = "/results"
CONTAINER_FILE = ".container.json"  # the image a run used, so that --resume uses the same one
TMPFS = {"/tmp": "rw,nosuid,nodev,size=2g"}
SHM_SIZE = "1g"  # collective libraries (NCCL, RCCL, oneCCL) use /dev/shm between processes
WAIT_FOREVER_S = 10 * 365 * 24 * 3600.0
# Passed from the host's environment into the container when set (fault injection for tests).
PASSTHROUGH_ENV = ("DEEPBENCH_FAULT",)
# Devices used when the host has them; a platform's own `devices` are required.
OPTIONAL_DEVICES = {"intel": ("/dev/dri",)}
OOM_NOTE = "the container ran out of memory (its cgroup's out-of-memory killer ended the harness)"
NO_NVIDIA_RUNTIME = ("could not select device driver", "nvidia-container-cli", "unknown runtime",
                     "nvidia-container-runtime")


def _owner(path: Path) -> str:
    st = path.stat()
    return f"{st.st_uid}:{st.st_gid}"


def _devices(platform: Platform) -> tuple[list[str], list[str]]:
    """Device mappings and extra groups; a missing required device is a missing GPU runtime."""
    missing = [d for d in platform.devices if not os.path.exists(d)]
    if missing:
        raise UserError(f"this host has no {' or '.join(missing)}, which {platform.name} containers need: install "
                        f"the GPU driver (ROCm: amdgpu-dkms) and check the GPU is visible, {LOCAL_HINT}")
    found = list(platform.devices) + [d for d in OPTIONAL_DEVICES.get(platform.name, ()) if os.path.exists(d)]
    groups = list(platform.group_add)
    if found and not groups:
        # Render nodes belong to a host group the container knows only by number.
        groups = sorted({str(Path(root, f).stat().st_gid) for d in found if os.path.isdir(d)
                         for root, _, files in os.walk(d) for f in files})
    return [f"{d}:{d}:rwm" for d in found], groups


def run_options(platform: Platform, image_id: str, plan_path: Path, outdir: Path,
                env: dict[str, str] | None = None, memory: str | None = None) -> dict[str, Any]:
    """Everything `containers.create` is given: one place, so tests check what runs."""
    from docker.types import DeviceRequest

    devices, groups = _devices(platform)
    environment = {"PYTHONUNBUFFERED": "1", "HOME": "/tmp", **dict(platform.environment)}
    environment.update({k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ})
    environment.update(env or {})
    opts: dict[str, Any] = dict(
        image=image_id,
        command=[PLAN_IN_CONTAINER, RESULTS_IN_CONTAINER],
        volumes={str(plan_path.resolve()): {"bind": PLAN_IN_CONTAINER, "mode": "ro"},
                 str(outdir.resolve()): {"bind": RESULTS_IN_CONTAINER, "mode": "rw"}},
        network_mode="none",
        read_only=True,
        tmpfs=dict(TMPFS),
        shm_size=SHM_SIZE,
        user=_owner(outdir),
        environment=environment,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        init=True,
        detach=True,
        labels={"org.deepbench.role": "harness"},
        platform=platform.platform_arch,
    )
    volumes, emulation_env = container_additions(platform)  # an arm64 image on an x86 host
    opts["volumes"].update(volumes)
    opts["environment"].update(emulation_env)
    if devices:
        opts["devices"] = devices
    if groups:
        opts["group_add"] = groups
    if platform.gpus:
        opts["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    if memory:
        opts["mem_limit"] = memory
        opts["memswap_limit"] = memory  # no swap beyond the limit: an OOM is an OOM
    return opts


class ContainerHarness:
    """One container running the harness over the plan; restarted by the supervisor after a crash."""

    def __init__(self, client: "docker.DockerClient", options: dict[str, Any], outdir: Path) -> None:
        from docker.errors import APIError

        self.log_path = outdir / LOG_FILE
        self._tail = ""
        self._code: int | None = None
        try:
            self.container: "Container" = client.containers.create(**options)
        except APIError as exc:
            raise _start_failure(exc) from None
        try:
            self.container.start()
        except APIError as exc:
            self._remove()
            raise _start_failure(exc) from None

    def lines(self) -> Iterator[str]:
        pending = b""
        for chunk in self.container.logs(stdout=True, stderr=False, stream=True, follow=True):
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                yield line.decode(errors="replace") + "\n"
        if pending:
            yield pending.decode(errors="replace")

    def interrupt(self) -> None:
        self._signal("SIGINT")

    def kill(self) -> None:
        self._signal("SIGKILL")

    def _signal(self, name: str) -> None:
        from docker.errors import APIError

        try:
            self.container.kill(signal=name)
        except APIError:
            pass  # it has already stopped

    def wait(self, timeout: float | None = None) -> int:
        import requests

        if self._code is not None:
            return self._code
        try:
            status = self.container.wait(timeout=timeout if timeout is not None else WAIT_FOREVER_S)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError) as exc:
            raise TimeoutError(f"the harness container did not stop within {timeout} s") from exc
        self._code = int(status.get("StatusCode", -1))
        self._finish()
        return self._code

    def stderr_tail(self) -> str:
        return self._tail

    def _finish(self) -> None:
        """Keep the harness's stderr (appended to harness.log) and say if memory ran out; then remove."""
        try:
            text = self.container.logs(stdout=False, stderr=True).decode(errors="replace")
            self.container.reload()
            if self.container.attrs.get("State", {}).get("OOMKilled"):
                text += f"\n{OOM_NOTE}\n"
        except Exception as exc:  # noqa: BLE001 - the daemon went away: say so, keep going
            text = f"(the harness's stderr could not be read: {exc})\n"
        self._tail = text[-4000:]
        with self.log_path.open("a") as log:
            log.write(text)
        self._remove()

    def _remove(self) -> None:
        try:
            self.container.remove(force=True)
        except Exception:  # noqa: BLE001 - already gone
            pass


def _start_failure(exc: Exception) -> UserError:
    text = str(getattr(exc, "explanation", None) or exc)
    if any(s in text for s in NO_NVIDIA_RUNTIME):
        return UserError(f"Docker cannot give containers the NVIDIA GPUs here ({text.splitlines()[0]}): install the "
                         f"NVIDIA driver and the NVIDIA Container Toolkit (then: sudo nvidia-ctk runtime configure "
                         f"--runtime=docker && sudo systemctl restart docker); {LOCAL_HINT}")
    if "/dev/kfd" in text or "/dev/dri" in text:
        return UserError(f"Docker cannot give the container the GPU devices ({text.splitlines()[0]}): check the "
                         f"driver is loaded and you may use /dev/kfd and /dev/dri; {LOCAL_HINT}")
    return UserError(f"the harness container could not start: {text.splitlines()[0]}; {LOCAL_HINT}")


@dataclass
class ContainerStarter:
    """Starts a harness container per call (the supervisor's Starter), and says what image ran."""

    client: "docker.DockerClient"
    options: dict[str, Any]
    outdir: Path
    provenance: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> ContainerHarness:
        return ContainerHarness(self.client, self.options, self.outdir)


def parse_env(pairs: list[str] | None) -> dict[str, str]:
    env = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UserError(f"--env takes NAME=VALUE, not '{pair}'")
        env[name] = value
    return env


def container_starter(plan_path: Path, outdir: Path, platform: Platform, *, image: str | None = None,
                      want_pull: bool = False, want_build: bool = False, env: dict[str, str] | None = None,
                      memory: str | None = None, base_image: str | None = None, wheelhouse: Path | None = None,
                      log: Callable[[str], None] = print, recorded: dict[str, Any] | None = None
                      ) -> ContainerStarter:
    """Reach Docker, find (or build, or pull) the image, and prepare the container's options.
    A resumed run uses the very image its first part ran in (by id: `recorded`, from its run.json,
    else the folder's older .container.json), unless --image says otherwise."""
    client = connect()
    recorded = recorded or _recorded(outdir)
    if recorded and not (image or want_pull or want_build):
        found = images.find(client, recorded["id"])
        if found is None:
            raise UserError(f"this run started in image {recorded['tag']} ({recorded['id'][:19]}), which is no longer "
                            f"here: rebuild or pull it, or continue in another with --image REF")
        ref, img = recorded["tag"], found
    else:
        ref = image or platform.image
        existed = not (want_build or want_pull) and images.find(client, ref) is not None
        img = images.ensure(client, platform, ref, want_pull=want_pull, want_build=want_build,
                            base_image=base_image, wheelhouse=wheelhouse, log=log)
        if existed:  # an image built or pulled just now is what was asked for
            images.check_harness(img, ref, platform, strict=image is None, log=log)
    options = run_options(platform, img.id, plan_path, outdir, env, memory)
    info = images.provenance(img, ref)
    (outdir / CONTAINER_FILE).write_text(json.dumps(info, indent=1) + "\n")
    return ContainerStarter(client, options, outdir, provenance=info)


def _recorded(outdir: Path) -> dict[str, Any] | None:
    path = outdir / CONTAINER_FILE
    try:
        return json.loads(path.read_text()) if path.exists() else None
    except (OSError, ValueError):
        return None
