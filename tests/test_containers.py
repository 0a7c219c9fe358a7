"""The containerized runner against a real Docker daemon (CI installs and starts one; these tests
never skip there). A local Debian base image is made once per machine (images/tools/local-base.sh,
no registry needed), the lock's wheels are downloaded on the host, and the Intel/CPU image is
built on them offline; the smoke suite then runs in real containers, as a non-root user. A
second build of the same lock on the same base holds the same packages; a submission's image
goes to an archive, is deleted, and verify brings it back from the archive alone; an image goes
to a registry (Debian's docker-registry, on this host) and comes back by digest. Each failure the
user can meet (no Docker, no daemon, no permission, no image, not a deepbench image) is produced
and its one-line message and exit status checked; the device check is tests/test_devices.py's."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deepbench.kernels.results import RunRecord, Status
from deepbench.kernels.results_file import read_results
from deepbench.kernels.suites import suite_kernels
from deepbench.runner.errors import UserError
from deepbench.runner.launch.images import image_archive, image_lock, platform_images
from deepbench.runner.launch.images.container import container_user, give_results_folder, run_options
from deepbench.runner.platforms import get_platform

from .conftest import REPO, require, run_cli, start_interruptible

# The session fixtures build a Debian base and an image on first use: allow them the time.
pytestmark = [pytest.mark.docker, pytest.mark.timeout(3000)]

BASE_IMAGE = "deepbench-local/debian:bookworm"
CACHE = Path(os.environ.get("DEEPBENCH_TEST_CACHE", Path.home() / ".cache" / "deepbench-tests"))
TORCH_WHEELS = sorted(Path("/opt/wheels").glob("torch-*+cpu-cp311-cp311-manylinux*_x86_64.whl"))
IMAGE_UID = 10001  # the images' own user (images/*/Dockerfile: USER 10001:10001)
SESSION_TAG = f"deepbench-test/{{platform}}:{os.getpid()}"
BUILD_TIMEOUT_S = 1500
RUN_TIMEOUT_S = 900
EXIT_USAGE = 2
RESULT_FILES = {
    "plan.json",
    "results.jsonl",
    "run.json",
    "facts.json",
    "harness.log",
    ".container.json",
    ".lock",
    ".harness.lock",
}
SMOKE_GEMMS = [k.id for k in suite_kernels("smoke") if k.op == "gemm"]


@pytest.fixture(scope="session")
def client(docker_client):
    return docker_client


@pytest.fixture(scope="session")
def base_image(client) -> str:
    proc = subprocess.run(
        ["bash", str(REPO / "images" / "tools" / "local-base.sh"), BASE_IMAGE],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return BASE_IMAGE


def _wheelhouse(platform: str, wheels: Path | None = None) -> Path:
    """The lock's wheels for CPython 3.11 (the local base's), downloaded once per machine and lock
    (a marker says it is complete)."""
    p = get_platform(platform)
    key = hashlib.sha256(image_lock.lock_path(p).read_bytes()).hexdigest()[:12]
    out = CACHE / f"wheelhouse-{platform}-cp311-{key}"
    if not (out / ".complete").exists():
        shutil.rmtree(out, ignore_errors=True)
        proc = run_cli(
            "deepbench",
            "images",
            "wheelhouse",
            "--platform",
            platform,
            "--out",
            str(out),
            "--python",
            "3.11",
            *(["--wheels", str(wheels)] if wheels else []),
            timeout=BUILD_TIMEOUT_S,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (out / ".complete").write_text("1\n")
    return out


@pytest.fixture(scope="session")
def intel_wheelhouse() -> Path:
    require(
        "" if TORCH_WHEELS else "no CPU torch wheel for CPython 3.11 in /opt/wheels (the image installs it)",
        "PyTorch's CPU wheel",
    )
    return _wheelhouse("intel", TORCH_WHEELS[-1].parent)


def _build(client, platform: str, base: str, wheelhouse: Path, *extra: str, tag: str | None = None) -> str:
    tag = tag or SESSION_TAG.format(platform=platform)
    proc = run_cli(
        "deepbench",
        "images",
        "build",
        "--platform",
        platform,
        "--base-image",
        base,
        "--wheelhouse",
        str(wheelhouse),
        "--tag",
        tag,
        *extra,
        timeout=BUILD_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert f"built {tag}" in proc.stdout
    return tag


@pytest.fixture(scope="session")
def intel_image(client, base_image, intel_wheelhouse):
    tag = _build(client, "intel", base_image, intel_wheelhouse)
    yield tag
    client.images.remove(tag, force=True)


def _image_id(client, tag: str) -> str:
    return client.images.get(tag).id


def _run(image: str, out: Path, *args: str, env: dict | None = None, timeout: float = RUN_TIMEOUT_S):
    return run_cli(
        "deepbench-run",
        "--platform",
        "intel",
        "--image",
        image,
        "--fast",
        "--time-cap",
        "0.1",
        "--out",
        str(out),
        *args,
        env=env,
        timeout=timeout,
    )


# --- the Intel/CPU image, end to end ----------------------------------------------------------

HOST_ONLY_PROBE = (
    "import importlib.util as u, sys; names = sys.argv[1:]; print(sorted(n for n in names if u.find_spec(n)))"
)
FREEZE = [
    "python3",
    "-m",
    "pip",
    "--python",
    "/opt/deepbench/bin/python",
    "--disable-pip-version-check",
    "freeze",
    "--all",
]


def test_image_holds_the_harness_without_the_host_libraries(client, intel_image, intel_wheelhouse) -> None:
    """The image installs its lock (the harness's packages and its extras'), not the runner's
    terminal, Docker, workbook and chart libraries (runner/launch/images/image_lock.py HOST_ONLY), nor the
    wheels, the source or setuptools, which stay in the build stage."""
    out = (
        client.containers.run(
            intel_image,
            entrypoint=["/opt/deepbench/bin/python", "-c", HOST_ONLY_PROBE, *sorted(image_lock.HOST_ONLY)],
            network_mode="none",
            remove=True,
        )
        .decode()
        .strip()
    )
    assert out == "[]"
    wheels = {w.name.split("-")[0].lower() for w in intel_wheelhouse.glob("*.whl")}
    assert {"torch", "mpi4py", "pydantic", "numpy", "mkl", "onednn", "tbb"} <= wheels
    assert not wheels & image_lock.HOST_ONLY
    listing = (
        client.containers.run(
            intel_image,
            entrypoint=["sh", "-c", "ls /tmp /opt; ls /opt/deepbench/lib/*/site-packages"],
            network_mode="none",
            remove=True,
        )
        .decode()
        .split()
    )
    assert "wheelhouse" not in listing and "deepbench-src" not in listing and "setuptools" not in listing
    assert {"deepbench", "deepbench-harness"} <= set(listing)
    labels = client.images.get(intel_image).labels
    assert labels["org.opencontainers.image.version"] == labels["org.deepbench.version"]
    assert labels[platform_images.LABEL_LOCK] == image_lock.lock_sha256(get_platform("intel"))


def _installed(client, tag: str) -> list[str]:
    return client.containers.run(tag, entrypoint=FREEZE, network_mode="none", remove=True).decode().splitlines()


@pytest.mark.slow
def test_two_builds_of_one_lock_and_base_hold_the_same_packages(
    client, base_image, intel_image, intel_wheelhouse
) -> None:
    """A second build, every step run again (--no-cache), from the same lock and base: pip freeze
    inside both lists the same packages at the same versions, and they are the lock's."""
    again = _build(
        client,
        "intel",
        base_image,
        intel_wheelhouse,
        "--no-cache",
        "--quiet",
        tag=SESSION_TAG.format(platform="intel-again"),
    )
    try:
        first, second = _installed(client, intel_image), _installed(client, again)
        assert first == second
        assert client.images.get(again).id != client.images.get(intel_image).id  # really built twice
    finally:
        client.images.remove(again, force=True)
    pins = {f"{p.name}=={p.version}" for p in image_lock.read_lock(image_lock.lock_path(get_platform("intel")))}
    frozen = {line.lower().replace("_", "-") for line in first}
    assert pins - frozen == {next(p for p in pins if p.startswith("setuptools=="))}  # build stage only
    assert "deepbench @ file:///tmp/deepbench-src" in first  # built from the context's source


def _expected_uid() -> int:
    """Never root inside: the image's user when started as root (as CI is), else the invoking user."""
    return IMAGE_UID if os.geteuid() == 0 else os.geteuid()


@pytest.mark.slow
def test_smoke_suite_in_a_container(client, intel_image, tmp_path: Path) -> None:
    """The smoke suite in the image, on Intel's libraries called directly (the intel platform's oneapi backend:
    MKL and oneDNN from the image's wheels); started as root (CI), it runs as the image's non-root user."""
    out = tmp_path / "smoke"
    proc = _run(intel_image, out, "--suite", "smoke")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "(container, backend oneapi)" in proc.stdout
    rs = read_results(out / "results.jsonl")  # validated by the result model
    assert len(rs) == len(suite_kernels("smoke"))
    served = {"gemm": "mkl", "sparse_gemm": "mkl", "conv": "onednn", "rnn": "onednn"}
    for r in rs:
        if r.op == "all_reduce" and r.status is Status.UNSUPPORTED:
            continue
        assert r.status is Status.OK, (r.id, r.reason)
        assert r.check.passed and r.time_us.median > 0
        assert r.backend == served.get(r.op, "torch"), (r.id, r.backend, r.info.get("native_unavailable"))
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    assert record.state == "complete" and record.platform == "intel"
    image = record.provenance["image"]
    assert image["id"] == _image_id(client, intel_image)
    assert image["digest"].startswith("sha256:") and len(image["digest"]) == len("sha256:") + 64
    assert image["labels"]["org.deepbench.platform"] == "intel"
    assert image["labels"]["org.deepbench.install"] == "wheelhouse (offline)"
    assert image["user"] == (f"{IMAGE_UID}:{IMAGE_UID}" if os.geteuid() == 0 else f"{os.geteuid()}:{os.getegid()}")
    # Nothing but the run's own files; what the harness wrote is its non-root user's.
    assert {p.name for p in out.iterdir()} <= RESULT_FILES
    assert out.stat().st_uid == _expected_uid() and (out / "results.jsonl").stat().st_uid == _expected_uid() != 0
    # No container is left behind.
    assert not client.containers.list(
        all=True, filters={"label": "org.deepbench.role=harness", "ancestor": intel_image}
    )


PROBE = r"""
import json, os, socket
def attempt(fn):
    try:
        fn(); return "ok"
    except OSError as exc:
        return type(exc).__name__ + ": " + str(exc)
def write(path):
    with open(path, "w") as f: f.write("x")
def connect():
    s = socket.create_connection(("1.1.1.1", 53), timeout=3); s.close()
def resolve():
    socket.getaddrinfo("pypi.org", 443)
caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]
print(json.dumps({
    "results": attempt(lambda: write("/results/probe")),
    "plan": attempt(lambda: write("/plan/plan.json")),
    "opt": attempt(lambda: write("/opt/deepbench/probe")),
    "etc": attempt(lambda: write("/etc/probe")),
    "tmp": attempt(lambda: write("/tmp/probe")),
    "connect": attempt(connect), "resolve": attempt(resolve),
    "interfaces": sorted(os.listdir("/sys/class/net")), "uid": os.getuid(), "caps": caps,
}))
"""


def test_container_sees_only_its_results_folder(client, intel_image, tmp_path: Path) -> None:
    """The options the runner starts the harness with: no network, the plan read-only, a
    read-only root, only /results (and a scratch tmpfs) writable, no capabilities."""
    out = tmp_path / "out"
    out.mkdir()
    plan = out / "plan.json"
    plan.write_text("{}\n")
    before = hashlib.sha256(plan.read_bytes()).hexdigest()
    image = client.images.get(intel_image)
    user = container_user(image.attrs["Config"]["User"])
    opts = run_options(get_platform("intel"), image.id, plan, out, user=user)
    give_results_folder(out, user)
    opts.update(entrypoint=["/opt/deepbench/bin/python", "-c", PROBE], command=[], detach=False, remove=True)
    seen = json.loads(client.containers.run(**opts).decode().strip().splitlines()[-1])
    assert seen["results"] == "ok" and (out / "probe").read_text() == "x"
    for path in ("plan", "opt", "etc"):
        assert "Read-only file system" in seen[path] or "Permission denied" in seen[path], (path, seen[path])
    assert seen["tmp"] == "ok"  # scratch space, gone with the container
    assert seen["connect"] != "ok" and seen["resolve"] != "ok"
    assert seen["interfaces"] == ["lo"]
    assert seen["uid"] == _expected_uid() != 0
    assert int(seen["caps"], 16) == 0
    assert hashlib.sha256(plan.read_bytes()).hexdigest() == before
    assert {p.name for p in out.iterdir()} == {"plan.json", "probe"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault, memory, words",
    [
        ("crash", None, "killed"),
        ("oom", "600m", "out of memory"),
    ],
)
def test_kernel_killed_in_container_is_failed_and_run_goes_on(
    intel_image, tmp_path: Path, fault: str, memory: str | None, words: str
) -> None:
    victim = SMOKE_GEMMS[1]
    out = tmp_path / fault
    extra = ["--memory", memory] if memory else []
    proc = _run(
        intel_image, out, "--suite", "smoke", "--ops", "gemm", "--env", f"DEEPBENCH_FAULT={fault}:{victim}", *extra
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    rs = {r.id.rsplit("/", 1)[0]: r for r in read_results(out / "results.jsonl")}
    assert set(rs) == set(SMOKE_GEMMS)
    assert rs[victim].status is Status.FAILED and words in rs[victim].reason, rs[victim].reason
    assert all(r.status is Status.OK for k, r in rs.items() if k != victim)
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    assert record.counts == {"ok": 2, "failed": 1}


@pytest.mark.slow
def test_interrupted_container_run_resumes(client, intel_image, tmp_path: Path) -> None:
    """Ctrl-C stops the container and keeps what it measured; --resume continues in the same image."""
    out = tmp_path / "resume"
    last = SMOKE_GEMMS[-1]
    cmd = [
        "deepbench-run",
        "--platform",
        "intel",
        "--image",
        intel_image,
        "--fast",
        "--time-cap",
        "0.1",
        "--suite",
        "smoke",
        "--ops",
        "gemm",
        "--out",
        str(out),
        "--env",
        f"DEEPBENCH_FAULT=hang:{last}",
    ]
    proc = start_interruptible(cmd)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while len(read_results(out / "results.jsonl")) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1.0)  # the harness is now inside the hanging kernel
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout[-2000:] + stderr
    first = read_results(out / "results.jsonl")
    assert len(first) == 2
    resumed = run_cli("deepbench-run", "--resume", str(out), timeout=RUN_TIMEOUT_S)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
    assert "(container" in resumed.stdout and "2 already done" in resumed.stdout
    rs = read_results(out / "results.jsonl")
    assert [r.id for r in rs[:2]] == [r.id for r in first]  # nothing measured was lost
    assert len(rs) == 3 and all(r.status is Status.OK for r in rs)
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    assert record.state == "complete" and record.provenance["image"]["id"] == _image_id(client, intel_image)
    assert not client.containers.list(
        all=True, filters={"label": "org.deepbench.role=harness", "ancestor": intel_image}
    )


@pytest.mark.slow
def test_sigterm_stops_a_container_run_which_resumes_in_its_image(client, intel_image, tmp_path: Path) -> None:
    """Issue 21: SIGTERM (kill, systemd, Slurm) stops a container run like Ctrl-C: the container is
    asked to stop, run.json says interrupted, exit 143; the folder records the image, and a resume
    (no marker file) continues in it."""
    out = tmp_path / "term"
    last = SMOKE_GEMMS[-1]
    proc = subprocess.Popen(
        [
            "deepbench-run",
            "--platform",
            "intel",
            "--image",
            intel_image,
            "--fast",
            "--time-cap",
            "0.1",
            "--suite",
            "smoke",
            "--ops",
            "gemm",
            "--out",
            str(out),
            "--env",
            f"DEEPBENCH_FAULT=hang:{last}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while len(read_results(out / "results.jsonl")) < 2 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.5)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, stdout[-2000:] + stderr
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    assert record.state == "interrupted" and record.provenance.local is False
    assert record.provenance["image"]["id"] == _image_id(client, intel_image)
    assert not (out / ".local").exists()
    resumed = run_cli("deepbench-run", "--resume", str(out), timeout=RUN_TIMEOUT_S)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
    assert "(container" in resumed.stdout and "2 already done" in resumed.stdout
    assert not client.containers.list(
        all=True, filters={"label": "org.deepbench.role=harness", "ancestor": intel_image}
    )


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["gloo", "mpi"])
def test_all_reduce_ranks_in_a_container(intel_image, tmp_path: Path, backend: str) -> None:
    """Issue 6: two ranks inside the one CPU container (loopback only): gloo under torchrun, and
    MPI_Allreduce under the mpiexec of MPICH's wheel, which the intel image installs (extra mpi)."""
    out = tmp_path / "all_reduce"
    proc = _run(
        intel_image,
        out,
        "--suite",
        "train",
        "--ops",
        "all_reduce",
        "--ranks",
        "2",
        "--limit",
        "3",
        "--backend",
        backend,
        "--fast",
        "--time-cap",
        "0.05",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    rs = read_results(out / "results.jsonl")
    assert len(rs) == 3 and all(r.status is Status.OK for r in rs), [(r.id, r.reason) for r in rs]
    for r in rs:
        assert r.parts[0].check.detail == "all 2 ranks hold the exact result" and r.parts[0].info["ranks"] == 2
        assert "in the container" in r.library["launcher"]
    assert len(read_results(out / "ranks" / "rank-1" / "results.jsonl")) == 3


def test_images_list_shows_built_image(intel_image) -> None:
    proc = run_cli("deepbench", "images", "list")
    assert proc.returncode == 0, proc.stderr
    assert intel_image.split(":")[0] in proc.stdout and "intel" in proc.stdout


# --- the vendor Dockerfiles, built on the local base (their vendor bases cannot be pulled here) --


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["nvidia", "amd"])
def test_gpu_dockerfiles_build_on_a_local_base(client, base_image, platform: str) -> None:
    wheelhouse = _wheelhouse(platform)  # their lock: the harness only; PyTorch and numpy are the vendor image's
    tag = _build(client, platform, base_image, wheelhouse)
    try:
        names = {p.name.split("-")[0].lower() for p in wheelhouse.glob("*.whl")}
        assert "torch" not in names
        out = (
            client.containers.run(
                tag,
                entrypoint=[
                    "/opt/deepbench/bin/python",
                    "-c",
                    "import os, deepbench.kernels.harness, deepbench.kernels.catalog as c; "
                    "print(os.getuid(), len(c.catalog()))",
                ],
                network_mode="none",
                remove=True,
            )
            .decode()
            .split()
        )
        assert out[0] == "10001" and int(out[1]) > 600  # the image's non-root user; DeepBench's kernels
        labels = client.images.get(tag).labels
        assert labels["org.deepbench.platform"] == platform and labels["org.deepbench.base-image"] == base_image
    finally:
        client.images.remove(tag, force=True)


# --- failures, said plainly -------------------------------------------------------------------


def _one_line_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "error:" in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_no_daemon(tmp_path: Path) -> None:
    proc = run_cli(
        "deepbench-run",
        "--platform",
        "intel",
        "--suite",
        "smoke",
        "--out",
        str(tmp_path / "o"),
        env={"DOCKER_HOST": f"unix://{tmp_path}/absent.sock"},
    )
    _one_line_error(proc, "no Docker daemon answers", "--local")


def test_docker_not_installed(tmp_path: Path) -> None:
    bindir = Path(sys.executable).parent  # deepbench-run is there, docker and dockerd are not
    assert not (bindir / "docker").exists()
    proc = run_cli(
        str(bindir / "deepbench-run"),
        "--platform",
        "intel",
        "--suite",
        "smoke",
        "--out",
        str(tmp_path / "o"),
        env={"DOCKER_HOST": f"unix://{tmp_path}/absent.sock", "PATH": str(bindir)},
    )
    _one_line_error(proc, "Docker is not installed", "--local")


def test_no_permission_on_the_socket(tmp_path: Path) -> None:
    """A socket the user may not open (as a user outside the docker group meets it)."""
    path = tmp_path / "docker.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    os.chmod(path, 0)
    cmd = ["deepbench-run", "--platform", "intel", "--suite", "smoke", "--out", str(tmp_path / "o")]
    if os.geteuid() == 0:  # root opens any file: drop the capabilities that let it
        cmd = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", *cmd]
    try:
        proc = run_cli(*cmd, env={"DOCKER_HOST": f"unix://{path}"})
    finally:
        server.close()
    _one_line_error(proc, "no permission to use the Docker socket", "docker group", "--local")


def test_image_missing_and_not_pullable(client, tmp_path: Path) -> None:
    proc = run_cli(
        "deepbench-run",
        "--platform",
        "intel",
        "--image",
        "deepbench-test/absent:none",
        "--suite",
        "smoke",
        "--out",
        str(tmp_path / "o"),
    )
    _one_line_error(proc, "deepbench-test/absent:none is not here and cannot be pulled", "--base-image", "--local")


def test_image_cannot_be_built_without_its_base(client, tmp_path: Path) -> None:
    tag = "deepbench-test/nobase:none"
    proc = run_cli(
        "deepbench",
        "images",
        "build",
        "--platform",
        "intel",
        "--tag",
        tag,
        "--base-image",
        "deepbench-test/no-such-base:none",
        "--quiet",
    )
    _one_line_error(proc, "base image deepbench-test/no-such-base:none is not here and cannot be pulled", "--local")
    # deepbench-run builds a missing platform image itself, and says the same when it cannot.
    proc = run_cli(
        "deepbench-run",
        "--platform",
        "intel",
        "--build",
        "--base-image",
        "deepbench-test/no-such-base:none",
        "--suite",
        "smoke",
        "--out",
        str(tmp_path / "o"),
    )
    assert proc.returncode == EXIT_USAGE and "cannot be pulled" in proc.stderr, proc.stderr


def test_image_that_is_not_deepbench_is_refused(client, base_image, tmp_path: Path) -> None:
    """--image naming an image without deepbench's labels (here the plain Debian base) is refused
    before anything runs, instead of failing inside with 'exec /plan/plan.json failed'."""
    out = tmp_path / "o"
    proc = run_cli("deepbench-run", "--platform", "intel", "--image", base_image, "--suite", "smoke", "--out", str(out))
    _one_line_error(proc, f"{base_image} is not a deepbench image", "--force-image")
    assert not (out / "results.jsonl").exists()


# --- a container run as a submission (issue 8) -------------------------------------------------


@pytest.fixture
def tiny_image(client):
    """A one-file image with the platform label (made here: nothing to pull), for archive and registry tests."""
    import io
    import tarfile

    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        entry = tarfile.TarInfo("hello")
        entry.size = 3
        tar.addfile(entry, io.BytesIO(b"hi\n"))
    tag = f"deepbench-test/tiny:{os.getpid()}"
    client.api.import_image_from_data(
        data.getvalue(),
        repository=tag.split(":")[0],
        tag=tag.split(":")[1],
        changes=["LABEL org.deepbench.platform=intel"],
    )
    image_id = client.images.get(tag).id
    yield tag
    if platform_images.find(client, image_id) is not None:
        client.images.remove(image_id, force=True)  # every tag it has, the registry's too


@pytest.mark.slow
def test_container_run_submits_checks_and_verifies_in_the_verifiers_own_image(
    client, intel_image, tmp_path: Path
) -> None:
    """A container run becomes a bundle that passes `deepbench check`, names its image by id and
    writes it to an archive beside the bundle. `deepbench verify` never loads that archive nor
    pulls the image the bundle names (issue 42: a submission is data): it re-runs the plan in an
    image built here from this tool's recipe (--image, its labels and harness hash checked), and
    says when that image is not the one the submission ran in. (Agreement itself is asserted by
    tests/test_submission.py's local re-run: with --time-cap 0.1 a container's few samples on a
    shared 2-core VM were seen 9-16x off.)"""
    run, bundle, again = tmp_path / "run", tmp_path / "bundle", tmp_path / "again"
    archive = tmp_path / "intel-image.tar"
    proc = _run(intel_image, run, "--suite", "smoke", "--threads", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    proc = run_cli(
        "deepbench",
        "submit",
        str(run),
        "--out",
        str(bundle),
        "--submitter",
        "CI",
        "--system-name",
        "CI VM",
        "--image-archive",
        str(archive),
        timeout=RUN_TIMEOUT_S,
    )
    assert proc.returncode == 0 and "check passed" in proc.stdout, proc.stdout + proc.stderr
    index = json.loads((bundle / "submission.json").read_text())
    image_id = _image_id(client, intel_image)
    assert index["local"] is False and index["image_digest"] == image_id  # built here: no registry digest
    assert f"--platform intel --image {image_id}" in index["reproduce"]
    assert index["image"] == {
        "id": image_id,
        "registry": None,
        "archive": {"name": archive.name, "sha256": image_archive.sha256_of(archive), "bytes": archive.stat().st_size},
    }
    sums = f"{index['image']['archive']['sha256']}  {archive.name}\n"
    assert (tmp_path / "intel-image.tar.sha256").read_text() == sums
    proc = run_cli(
        "deepbench",
        "verify",
        str(bundle),
        "--image",
        intel_image,
        "--quiet",
        "--out",
        str(again),
        "--tolerance",
        "2",
        "--max-tolerance",
        "2",
        "--max-noise",
        "10",
        env={"COLUMNS": "300"},
        timeout=RUN_TIMEOUT_S,
    )
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stdout[-3000:] + proc.stderr
    assert "loading" not in proc.stdout and "pulling" not in proc.stdout
    record = RunRecord.model_validate_json((again / "run.json").read_text())
    assert record.provenance["image"]["id"] == image_id and record.provenance.local is False
    report = json.loads((again / "verify.json").read_text())
    assert report["local"] is False and report["environment_differences"] == []  # the same image: no difference
    assert report["agree"] + report["disagree"] + report["unverifiable"] == len(suite_kernels("smoke"))
    assert report["agree"] > report["disagree"], proc.stdout[-3000:]
    assert (proc.returncode == 0) == (report["disagree"] == 0 and report["unverifiable"] == 0)


REGISTRY_START_S = 15.0


@pytest.fixture
def registry(tmp_path: Path):
    """Debian's docker-registry (the distribution registry) on a free loopback port: Docker
    trusts 127.0.0.0/8 without TLS. CI installs it; elsewhere the test skips without it."""
    import urllib.request

    binary = shutil.which("docker-registry")
    require("" if binary else "it is not installed (apt-get install docker-registry)", "a local registry")
    assert binary
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "registry.yml"
    config.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'registry'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\nlog:\n  level: error\n"
    )
    server = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + REGISTRY_START_S
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                pytest.fail("docker-registry did not start")
            time.sleep(0.2)
    yield f"127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=30)


def test_image_pushed_to_a_registry_comes_back_by_digest(client, registry, tiny_image, tmp_path: Path) -> None:
    """deepbench images push, then the image deleted: a submission's registry reference brings back
    the very image (pull by digest, for a reader to inspect; verify never runs it); a digest of
    another image is refused."""
    image_id = _image_id(client, tiny_image)
    proc = run_cli("deepbench", "images", "push", tiny_image, "--to", f"{registry}/deepbench-test/tiny:1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ref = proc.stdout.split("pushed: ")[1].split()[0]
    assert ref.startswith(f"{registry}/deepbench-test/tiny@sha256:")
    client.images.remove(image_id, force=True)
    said = []
    assert image_archive.pull_by_digest(client, ref, image_id, said.append).id == image_id
    assert platform_images.find(client, image_id) is not None and said == [f"pulling {ref} ..."]
    with pytest.raises(UserError, match="not the one expected"):
        image_archive.pull_by_digest(client, ref, "sha256:" + "0" * 64, log=lambda line: None)


def test_base_tags_are_pinned_by_digest(client, registry, tiny_image, tmp_path: Path, monkeypatch) -> None:
    """A base named by tag: `deepbench images lock` asks its registry for the digest (pin_base), and
    a build records the digest a pulled base had (after its first pull); builds then use tag@digest."""
    from deepbench.runner.launch.images import image_sources

    tag = f"{registry}/deepbench-test/base:1"
    pushed = image_archive.push(client, tiny_image, tag, log=lambda line: None).split("@")[1]
    monkeypatch.setattr(image_sources, "IMAGES_DIR", tmp_path)
    (tmp_path / "intel").mkdir()
    (tmp_path / "intel" / "Dockerfile").write_text(f"ARG BASE_IMAGE={tag}\nFROM ${{BASE_IMAGE}}\n")
    intel = get_platform("intel")
    assert image_sources.pinned_base(intel, tag) == tag  # nothing recorded yet
    platform_images.pin_base(client, intel, log=lambda line: None)
    assert image_sources.pinned_base(intel, tag) == f"{tag}@{pushed}"
    (tmp_path / "intel" / image_sources.BASE_LOCK).unlink()
    client.images.remove(tag)
    client.images.pull(tag.rsplit(":", 1)[0], tag="1")  # the first pull: the image now has its repo digest
    said = []
    platform_images._record_base_digest(client, intel, tag, said.append)
    assert image_sources.pinned_base(intel, tag) == f"{tag}@{pushed}" and "base.lock" in said[0]
