"""The platform registry: what each vendor's platform runs, in which image, with which devices.

A platform names the image (built from images/<vendor>/), how the container reaches the devices
(NVIDIA GPUs via a device request; ROCm via /dev/kfd and /dev/dri with the video group; Intel
GPUs via /dev/dri; CPUs need nothing), and the precisions run when the user names none
(DeepBench's: training in fp32 and 16-bit; its server inference in
int8 for GEMM and convolution and fp32 for RNN and sparse GEMM, each beside fp16, on GPUs;
CPUs in fp32). The backend it runs is not named here: it is the one whose declaration prefers the
platform most (kernels/backends: `preferred_backend`). `deepbench-run`'s "where to run" options
(--platform, --local, --backend) are built here."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from platform import machine

from ..kernels import __version__
from ..kernels import backends as registry  # BACKENDS read through the module: the registry in use when asked
from ..kernels.backends import declaration_of, preferred_backend
from .errors import UserError

ALL_SETS = "*"
LOCAL_DEFAULT = "cpu"  # the platform of --local without --platform: any CPU


@dataclass(frozen=True)
class Platform:
    name: str
    aliases: tuple[str, ...]
    description: str
    image_dir: str
    device: str
    # set -> precisions, or set -> operation -> precisions (ALL_SETS: every other set/operation)
    default_precisions: dict[str, tuple[str, ...] | dict[str, tuple[str, ...]]]
    gpus: bool = False
    devices: tuple[str, ...] = ()
    group_add: tuple[str, ...] = ()
    environment: dict[str, str] = field(default_factory=dict)
    platform_arch: str = "linux/amd64"

    @property
    def backend(self) -> str:
        """The backend a plan on this platform names unless --backend says: the one whose
        declaration prefers this platform most."""
        chosen = preferred_backend(self.name)
        if chosen is None:
            raise UserError(f"no installed backend serves the {self.name} platform (see docs/architecture.md)")
        return chosen

    def summary(self) -> str:
        """One line: what the platform is, and the backend and libraries it runs (from declarations)."""
        declared = declaration_of(self.backend)
        libraries = declared.libraries or tuple(
            lib for name in declared.delegates for lib in declaration_of(name).libraries
        )
        return f"{self.description}: the {self.backend} backend ({', '.join(libraries)})"

    @property
    def image(self) -> str:
        """The local tag the runner builds or pulls; results record the digest, not this."""
        return f"deepbench/{self.name}:{__version__}"

    def precisions_for(self, set_name: str | None, op: str = "") -> tuple[str, ...]:
        chosen = self.default_precisions.get(set_name or ALL_SETS, self.default_precisions[ALL_SETS])
        if isinstance(chosen, dict):
            return chosen.get(op, chosen[ALL_SETS])
        return chosen


# Per suite set (or ALL_SETS): the precisions, or per operation the precisions.
Defaults = dict[str, tuple[str, ...] | dict[str, tuple[str, ...]]]
CPU_DEFAULTS: Defaults = {ALL_SETS: ("fp32",)}
# ARM boards run DeepBench's device set in fp32 and int8 (int8 inputs, int32 accumulate), as DeepBench did there.
ARM_DEFAULTS: Defaults = {ALL_SETS: ("fp32",), "inference_device": ("fp32", "int8")}
# DeepBench's server tables: GEMM and convolution in int8, RNN and sparse GEMM in fp32; each beside fp16.
GPU_DEFAULTS: Defaults = {
    ALL_SETS: ("fp32", "fp16"),
    "train": ("fp32", "fp16"),
    "inference_server": {
        "gemm": ("int8", "fp16"),
        "conv": ("int8", "fp16"),
        "rnn": ("fp32", "fp16"),
        "sparse_gemm": ("fp32", "fp16"),
        ALL_SETS: ("fp16", "int8"),
    },
    "inference_device": ("fp16", "int8"),
    "sparse_2of4": ("fp16", "int8"),
}  # 2:4 structured sparsity (suite sparse-2of4): cuSPARSELt's 16- and 8-bit types

PLATFORMS: dict[str, Platform] = {
    p.name: p
    for p in (
        Platform(
            "cpu",
            ("local", "x86", "x86_64"),
            "any x86-64 CPU",
            "intel",
            "cpu",
            CPU_DEFAULTS,
        ),
        Platform(
            "intel",
            ("oneapi", "xeon"),
            "Intel CPUs (Intel GPUs via /dev/dri)",
            "intel",
            "cpu",
            CPU_DEFAULTS,
            devices=(),
        ),
        Platform(
            "nvidia",
            ("cuda", "nv"),
            "NVIDIA GPUs",
            "nvidia",
            "cuda",
            GPU_DEFAULTS,
            gpus=True,
        ),
        Platform(
            "amd",
            ("rocm", "hip"),
            "AMD GPUs",
            "amd",
            "cuda",
            GPU_DEFAULTS,
            devices=("/dev/kfd", "/dev/dri"),
            group_add=("video",),
        ),
        Platform(
            "arm",
            ("arm64", "aarch64", "raspberry-pi", "rpi"),
            "ARM boards (Raspberry Pi)",
            "arm",
            "cpu",
            ARM_DEFAULTS,
            platform_arch="linux/arm64",
        ),
    )
}


def platform_names() -> str:
    """Every name --platform takes, each platform with its aliases: "amd (rocm, hip)"."""
    return ", ".join(f"{p.name} ({', '.join(p.aliases)})" if p.aliases else p.name for p in PLATFORMS.values())


def get_platform(name: str) -> Platform:
    key = name.strip().lower()
    for p in PLATFORMS.values():
        if key == p.name or key in p.aliases:
            return p
    names = ", ".join(f"{p.name} ({'/'.join(p.aliases)})" for p in PLATFORMS.values())
    raise UserError(f"unknown platform '{name}' (choose from: {names})")


def add_where_arguments(parser: argparse.ArgumentParser) -> None:
    """deepbench-run's "where to run" group: the platform, --local, and the backend."""
    where = parser.add_argument_group("where to run")
    where.add_argument("--platform", metavar="P", help=f"{platform_names()} (default: cpu with --local, else required)")
    where.add_argument(
        "--local", action="store_true", help="run the harness in a subprocess on this machine, with no container"
    )
    where.add_argument("--backend", metavar="B", help=_backend_help())


def _backend_help() -> str:
    """--backend's help, from the declarations: each platform's backend (one that routes each operation
    to another backend's library names those), and every other backend."""
    chosen = []
    for platform in PLATFORMS.values():
        delegates = declaration_of(platform.backend).delegates
        chosen.append(
            f"{platform.name}: {platform.backend}"
            + (f" (each operation on {', '.join(delegates)})" if delegates else "")
        )
    return (
        f"harness backend, one of {', '.join(registry.BACKENDS)} (default: the platform's; {'; '.join(chosen)}); "
        "name one to force it for every kernel"
    )


# The CPU families a platform's image is built for (Platform.platform_arch) and the machine names a host
# reports for them (platform.machine()).
FAMILY_OF_ARCH = {"linux/amd64": "x86-64", "linux/arm64": "ARM"}
FAMILY_OF_MACHINE = {"x86_64": "x86-64", "amd64": "x86-64", "aarch64": "ARM", "arm64": "ARM"}


def host_family(name: str) -> str | None:
    """The CPU family of a machine name (aarch64, armv7l: ARM; x86_64: x86-64); None when unknown."""
    low = name.lower()
    return FAMILY_OF_MACHINE.get(low) or ("ARM" if low.startswith("arm") else None)


def check_local_host(platform: Platform, host_machine: str | None = None) -> None:
    """--local runs the harness on this machine's own CPU: a CPU platform of another family (--platform arm
    on an x86-64 host) would record a platform that did not run, so it is refused, saying how to run it.
    The generic `cpu` platform runs anywhere, and GPU platforms run on hosts of either family (a GH200 is
    ARM)."""
    want = FAMILY_OF_ARCH.get(platform.platform_arch)
    here = host_family(host_machine or machine())
    if platform.device != "cpu" or platform.name == LOCAL_DEFAULT or want is None or here is None or want == here:
        return
    raise UserError(
        f"--local --platform {platform.name} runs the harness on this {here} CPU ({host_machine or machine()}), "
        f"not on {platform.description}: run it on such a machine, or here in the platform's image without "
        f"--local (emulated: the emulator's times), or on this CPU as it is: --local --backend {platform.backend}"
    )


def check_backend(name: str) -> None:
    """--backend: a registered backend (a plug-in's included), said before anything is planned."""
    if name not in registry.BACKENDS:
        raise UserError(f"--backend: unknown backend '{name}' (choose from: {', '.join(registry.BACKENDS)})")
