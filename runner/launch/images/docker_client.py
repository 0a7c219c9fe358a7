"""Connect to Docker, and say plainly what to do when that is not possible.

Every way of not reaching a daemon (none installed, none running, no permission on its socket)
becomes one UserError line that names the fix and the way around it (--local)."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from ...errors import UserError

if TYPE_CHECKING:
    import docker

DEFAULT_SOCKET = "/var/run/docker.sock"
# The way around, named with its command: `deepbench images build` has no --local (an image needs Docker).
LOCAL_HINT = "or run on this machine without a container: deepbench-run --local (with the same options)"


def _socket_path() -> str:
    host = os.environ.get("DOCKER_HOST", "")
    if host.startswith("unix://"):
        return host[len("unix://") :]
    return "" if host else DEFAULT_SOCKET


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost exception (the SDK wraps the OS error in requests' and urllib3's)."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = exc.__cause__ or exc.__context__
        if inner is None:
            for arg in getattr(exc, "args", ()):
                if isinstance(arg, BaseException):
                    inner = arg
                    break
        if inner is None:
            break
        exc = inner
    return exc


def explain(exc: BaseException) -> UserError:
    """Turn a failure to reach the daemon into what the user should do."""
    text = str(exc)
    where = os.environ.get("DOCKER_HOST") or f"unix://{DEFAULT_SOCKET}"
    cause = _root_cause(exc)
    if isinstance(cause, PermissionError) or "Permission denied" in text:
        return UserError(
            f"no permission to use the Docker socket {where}: add yourself to the docker group "
            f"(sudo usermod -aG docker $USER, then log in again) or run as root; {LOCAL_HINT}"
        )
    socket = _socket_path()
    installed = shutil.which("docker") or shutil.which("dockerd")
    if not installed and (not socket or not os.path.exists(socket)):
        return UserError(
            f"Docker is not installed here: install it (Debian/Ubuntu: sudo apt-get install docker.io) "
            f"and start it; {LOCAL_HINT}"
        )
    if (
        isinstance(cause, (FileNotFoundError, ConnectionRefusedError))
        or "Connection refused" in text
        or "No such file" in text
    ):
        return UserError(
            f"no Docker daemon answers at {where}: start it (sudo systemctl start docker, or "
            f"sudo dockerd &) or point DOCKER_HOST at one; {LOCAL_HINT}"
        )
    return UserError(
        f"cannot reach Docker at {where}: {text.splitlines()[0] if text else type(exc).__name__}; {LOCAL_HINT}"
    )


def connect() -> docker.DockerClient:
    """A client that has answered a ping, or a UserError that says why not."""
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except (DockerException, OSError) as exc:
        raise explain(exc) from None
    except Exception as exc:  # noqa: BLE001 - requests' errors; anything else reaching the daemon
        raise explain(exc) from None
    return client
