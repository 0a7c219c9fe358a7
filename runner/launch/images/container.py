"""The harness in the platform's container: a HarnessProcess (see supervise.py) over the docker SDK.

The container sees only two host paths: the plan, read-only, at /plan/plan.json, and the results
folder, writable, at /results. Its root filesystem is read-only (scratch space is a tmpfs /tmp),
it has no network, no capabilities, a limit on processes and on memory (both overridable), and
never runs as root: it runs as the invoking user when that is not root (what it writes is
theirs), else as the image's own non-root user, to whom the results folder is then given
(chown: its permission bits stay as they are). It reaches the devices its platform names
(checked first, before any image is built or pulled: devices.py): NVIDIA GPUs through a device
request (the NVIDIA container toolkit), ROCm's /dev/kfd and /dev/dri with the groups that own
them and video, an Intel GPU's /dev/dri when the host has one, nothing for CPUs.

The harness prints one JSON event per line on stdout (streamed to the supervisor); its stderr is
appended to OUTDIR/harness.log when it exits. An init process (docker's tini) is PID 1, so a
kernel that kills the harness (a crash, the out-of-memory killer) ends the container with the
harness's signal status, which the supervisor records as that kernel's failure before it starts
a new container for the rest.

The image is chosen before the run's folder is made (`choose_image`; for verify `own_image`, which
proves it this machine's own build: own_images.py), so that no Docker, no image or a refused one leaves
no folder; `start_in` then prepares the containers on the plan in that folder."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import UserError
from ...platforms import Platform
from ..running.local import LOG_FILE
from . import own_images, platform_images
from .container_options import (
    DEFAULT_PIDS_LIMIT,
    MEMORY_SHARE,
    NO_LIMIT,
    ContainerOptions,
    check_memory,
    check_pids_limit,
)
from .devices import check_host
from .docker_client import LOCAL_HINT, connect
from .emulation import container_additions

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
FALLBACK_USER = "65534:65534"  # nobody: for an image whose own user is root or only a name
NO_OPTIONS = ContainerOptions()  # the platform's own image, found or built, with the default limits
Log = Callable[[str], None]
NO_NVIDIA_RUNTIME = (
    "could not select device driver",
    "nvidia-container-cli",
    "unknown runtime",
    "nvidia-container-runtime",
)


def container_user(image_user: str) -> str:
    """uid:gid the harness runs as: never root. The invoking user when not root; as root, the
    image's own numeric user (our images: 10001), else nobody."""
    if os.geteuid() != 0:
        return f"{os.geteuid()}:{os.getegid()}"
    uid, _, gid = (image_user or "").partition(":")
    if uid.isdigit() and int(uid) != 0 and (not gid or gid.isdigit()):
        return f"{uid}:{gid or uid}"
    return FALLBACK_USER


def give_results_folder(outdir: Path, user: str) -> None:
    """As root, hand the results folder and what is in it to the container's user, so that it can
    write there; the permission bits are left as they are (nothing is opened to others)."""
    if os.geteuid() != 0:
        return
    uid, gid = (int(x) for x in user.split(":"))
    os.chown(outdir, uid, gid)
    for root, dirs, files in os.walk(outdir):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, gid)


def _memory_limit(memory: str | None) -> str | None:
    """--memory as docker takes it: the default share of this host's memory, none, or SIZE."""
    if memory is None:
        return str(int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * MEMORY_SHARE))
    if memory.strip().lower() in NO_LIMIT:
        return None
    check_memory(memory)
    return memory


def _device_nodes(paths: list[str]) -> Iterator[Path]:
    for path in paths:
        if os.path.isdir(path):
            for root, _, files in os.walk(path):
                yield from (Path(root, f) for f in files)
        else:
            yield Path(path)


def _devices(platform: Platform) -> tuple[list[str], list[str]]:
    """Device mappings and extra groups (the required devices were checked by devices.check_host)."""
    found = [d for d in (*platform.devices, *OPTIONAL_DEVICES.get(platform.name, ())) if os.path.exists(d)]
    # The device nodes belong to host groups (video, render) the container knows only by number:
    # the non-root harness gets those groups, and the platform's named ones (ROCm's video).
    groups = list(platform.group_add) + sorted({str(n.stat().st_gid) for n in _device_nodes(found) if n.exists()})
    return [f"{d}:{d}:rwm" for d in found], groups


def run_options(
    platform: Platform,
    image_id: str,
    plan_path: Path,
    outdir: Path,
    env: dict[str, str] | None = None,
    memory: str | None = None,
    *,
    user: str = FALLBACK_USER,
    pids_limit: int | None = None,
) -> dict[str, Any]:
    """Everything `containers.create` is given: one place, so tests check what runs. `memory`
    None is the default limit ("none" lifts it), `pids_limit` None the default (0 lifts it)."""
    from docker.types import DeviceRequest

    devices, groups = _devices(platform)
    environment = {"PYTHONUNBUFFERED": "1", "HOME": "/tmp", **dict(platform.environment)}
    environment.update({k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ})
    environment.update(env or {})
    opts: dict[str, Any] = dict(
        image=image_id,
        command=[PLAN_IN_CONTAINER, RESULTS_IN_CONTAINER],
        volumes={
            str(plan_path.resolve()): {"bind": PLAN_IN_CONTAINER, "mode": "ro"},
            str(outdir.resolve()): {"bind": RESULTS_IN_CONTAINER, "mode": "rw"},
        },
        network_mode="none",
        read_only=True,
        tmpfs=dict(TMPFS),
        shm_size=SHM_SIZE,
        user=user,
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
    if os.geteuid() != 0:  # the invoking user's groups too: the folder may be theirs through one
        groups += [str(g) for g in os.getgroups() if g != os.getegid()]
    if groups:
        opts["group_add"] = list(dict.fromkeys(groups))
    if platform.gpus:
        opts["device_requests"] = [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    limit = _memory_limit(memory)
    if limit:
        opts["mem_limit"] = limit
        opts["memswap_limit"] = limit  # no swap beyond the limit: an OOM is an OOM
    check_pids_limit(pids_limit)
    pids = DEFAULT_PIDS_LIMIT if pids_limit is None else pids_limit
    if pids:
        opts["pids_limit"] = pids
    return opts


class ContainerHarness:
    """One container running the harness over the plan; restarted by the supervisor after a crash."""

    def __init__(self, client: docker.DockerClient, options: dict[str, Any], outdir: Path) -> None:
        from docker.errors import APIError

        self.log_path = outdir / LOG_FILE
        self._tail = ""
        self._code: int | None = None
        try:
            self.container: Container = client.containers.create(**options)
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
        return UserError(
            f"Docker cannot give containers the NVIDIA GPUs here ({text.splitlines()[0]}): install the "
            f"NVIDIA driver and the NVIDIA Container Toolkit (then: sudo nvidia-ctk runtime configure "
            f"--runtime=docker && sudo systemctl restart docker); {LOCAL_HINT}"
        )
    if "/dev/kfd" in text or "/dev/dri" in text:
        return UserError(
            f"Docker cannot give the container the GPU devices ({text.splitlines()[0]}): check the "
            f"driver is loaded and you may use /dev/kfd and /dev/dri; {LOCAL_HINT}"
        )
    return UserError(f"the harness container could not start: {text.splitlines()[0]}; {LOCAL_HINT}")


@dataclass
class ContainerStarter:
    """Starts a harness container per call (the supervisor's Starter), and says what image ran."""

    client: docker.DockerClient
    options: dict[str, Any]
    outdir: Path
    provenance: dict[str, Any] = field(default_factory=dict)

    def __call__(self) -> ContainerHarness:
        return ContainerHarness(self.client, self.options, self.outdir)


@dataclass(frozen=True)
class ChosenImage:
    """The image a run will start its containers from, found (or built, or pulled) and checked before
    its results folder is made, with the daemon's client that found it and the name it was asked by."""

    client: Any
    image: Any
    ref: str


def choose_image(platform: Platform, options: ContainerOptions = NO_OPTIONS, log: Log = print) -> ChosenImage:
    """A new run's image: reach Docker, find (or build, or pull) the image --image names or the
    platform's, and check it (its labels: the user's own choice of image). The host's devices are
    checked first by the caller (devices.check_host), before anything is built or pulled."""
    client = connect()
    img, ref = _asked_image(client, platform, options, log)
    return ChosenImage(client, img, ref)


def own_image(platform: Platform, image: str | None, log: Log = print) -> ChosenImage:
    """deepbench verify's image, proven before anything is made: the host's devices checked, Docker
    reached, and the image (the platform's tag, built here when missing, or --image, present here and
    never pulled) proven to be this machine's own build of this checkout (own_images.py)."""
    check_host(platform, log)
    client = connect()
    img, ref = _own_image(client, platform, image, log)
    return ChosenImage(client, img, ref)


def start_in(
    chosen: ChosenImage,
    plan_path: Path,
    outdir: Path,
    platform: Platform,
    options: ContainerOptions = NO_OPTIONS,
    env: dict[str, str] | None = None,
) -> ContainerStarter:
    """The starter of harness containers from `chosen` on the plan in its results folder."""
    return _starter(chosen.client, chosen.image, chosen.ref, plan_path, outdir, platform, options, env)


def container_starter(
    plan_path: Path,
    outdir: Path,
    platform: Platform,
    options: ContainerOptions = NO_OPTIONS,
    *,
    env: dict[str, str] | None = None,
    log: Log = print,
    recorded: dict[str, Any] | None = None,
) -> ContainerStarter:
    """Check the host's devices, reach Docker, find (or build, or pull) the image and check it,
    and prepare the container's options. A resumed run uses the very image its first part ran in
    (by id: `recorded`, from its run.json, else the folder's older .container.json), unless
    --image says otherwise."""
    check_host(platform, log)  # before anything is built or pulled
    recorded = recorded or _recorded(outdir)
    wanted = options.image or options.pull or options.build
    if recorded and not wanted:
        client = connect()
        img, ref = _recorded_image(client, recorded)
        chosen = ChosenImage(client, img, ref)
    else:
        chosen = choose_image(platform, options, log)
    return start_in(chosen, plan_path, outdir, platform, options, env)


def _recorded_image(client: Any, recorded: dict[str, Any]) -> tuple[Any, str]:
    """The image a resumed run started in, by id."""
    found = platform_images.find(client, recorded["id"])
    if found is None:
        raise UserError(
            f"this run started in image {recorded['tag']} ({recorded['id'][:19]}), which is no longer "
            f"here: rebuild or pull it, or continue in another with --image REF"
        )
    return found, recorded["tag"]


def _asked_image(client: Any, platform: Platform, options: ContainerOptions, log: Log) -> tuple[Any, str]:
    """The image --image names (or the platform's), pulled or built as asked or where missing, and
    checked to be one of this platform and version unless it was built just now."""
    ref = options.image or platform.image
    existed = not (options.build or options.pull) and platform_images.find(client, ref) is not None
    img = platform_images.ensure(
        client,
        platform,
        ref,
        want_pull=options.pull,
        want_build=options.build,
        base_image=options.base_image,
        wheelhouse=options.wheelhouse,
        log=log,
    )
    built = options.build or (not existed and ref == platform.image)
    if not built:  # an image built just now is what was asked for
        check = platform_images.check_image
        check(img, ref, platform, own=options.image is None, force=options.force_image, log=log)
    return img, ref


def _starter(
    client: Any,
    img: Any,
    ref: str,
    plan_path: Path,
    outdir: Path,
    platform: Platform,
    asked: ContainerOptions,
    env: dict[str, str] | None,
) -> ContainerStarter:
    user = container_user((img.attrs.get("Config") or {}).get("User", ""))
    options = run_options(
        platform, img.id, plan_path, outdir, env, asked.memory, user=user, pids_limit=asked.pids_limit
    )
    give_results_folder(outdir, user)
    info = {**platform_images.provenance(img, ref), "user": user}
    (outdir / CONTAINER_FILE).write_text(json.dumps(info, indent=1) + "\n")
    return ContainerStarter(client, options, outdir, provenance=info)


def _own_image(client: Any, platform: Platform, image: str | None, log: Log) -> tuple[Any, str]:
    """The verifier's own image: the platform's tag (built here from the project's recipe when
    missing) or the image the verifier names, present here (never pulled); either must be this
    machine's own build of this checkout, proven by its id and the harness read out of it, never by
    its labels (own_images.py): a hard refusal otherwise (no --force-image)."""
    ref = image or platform.image
    if image is not None:
        img = platform_images.find(client, ref)
        if img is None:
            raise UserError(
                f"--image {ref} is not here: verify runs only an image built here (deepbench images build "
                f"--platform {platform.name}), never one it would have to pull"
            )
    else:
        img = platform_images.ensure(client, platform, ref, log=log)
    own_images.check_own(client, img, ref, platform)
    return img, ref


def _recorded(outdir: Path) -> dict[str, Any] | None:
    path = outdir / CONTAINER_FILE
    try:
        return json.loads(path.read_text()) if path.exists() else None
    except (OSError, ValueError):
        return None
