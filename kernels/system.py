"""The system description: what a run ran on, collected automatically, in a versioned schema.

DeepBench took a hand-filled "Specs" sheet with every spreadsheet; MLPerf requires a system
description beside every result. Here the harness collects it where the kernels run (inside the
container, or on the host with --local) and the runner collects one for the host too. What is
measured (`measured`: CPU, memory, OS, kernel, accelerators, board, native library versions) is
kept apart from what a vendor types in (`vendor`: submitter, system name, notes), so a checker can
compare the measured part with the results, and a vendor can never "fill in" a measured field.

Every probe is optional: a tool or library that is absent, or a file that cannot be read, leaves
its field empty and adds a line to `probe_notes` saying why. Nothing here imports PyTorch (the
host side needs none); the libraries the kernels used come from the backend
(`Backend.library_versions()`), passed in by the harness.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

SYSTEM_SCHEMA: Final = "deepbench.system/1"
PROBE_TIMEOUT_S = 15.0  # an accelerator tool that hangs (a wedged driver) must not hang the harness
GIB = 2**30
# PCI vendor ids of the accelerators we name when no vendor tool is present (sysfs fallback).
PCI_VENDORS = {"0x10de": "nvidia", "0x1002": "amd", "0x8086": "intel"}
# PCI classes: 0x03xxxx display controllers, 0x12xxxx processing accelerators.
PCI_ACCELERATOR_CLASSES = ("0x03", "0x12")
DEVICE_TREE_MODELS = (Path("/proc/device-tree/model"), Path("/sys/firmware/devicetree/base/model"))


class _Model(BaseModel):
    # Bundles are untrusted input: unknown fields are errors, not silently kept.
    model_config = ConfigDict(frozen=True, extra="forbid")


class Cpu(_Model):
    model: str = Field(description="the CPU's name as /proc/cpuinfo gives it (the same rule as the CPU backends)")
    architecture: str
    logical_cpus: int | None = None
    usable_cpus: int | None = Field(None, description="CPUs this process may run on (affinity, cgroup cpusets)")
    physical_cores: int | None = None
    sockets: int | None = None
    max_mhz: float | None = None


class OperatingSystem(_Model):
    name: str = Field(description="PRETTY_NAME of /etc/os-release, else platform.system()")
    kernel: str
    libc: str = ""
    python: str


class Accelerator(_Model):
    vendor: str = Field(description="nvidia, amd, intel ...")
    index: int
    name: str
    memory_gib: float | None = None
    driver: str = ""
    firmware: dict[str, str] = Field(default_factory=dict, description="VBIOS and other firmware versions")
    clocks_mhz: dict[str, float] = Field(default_factory=dict, description="max_sm, max_memory, ... where readable")
    power_limit_w: float | None = None
    pci_bus_id: str = ""
    source: str = Field(description="what reported it: nvml, nvidia-smi, amdsmi, rocm-smi, sysfs")


class Board(_Model):
    model: str = Field(description="the device tree's model (a Raspberry Pi names itself here)")


class MeasuredSystem(_Model):
    """Collected by the tool; a submission's checker compares this with the results."""

    cpu: Cpu
    memory_gib: float | None = None
    os: OperatingSystem
    accelerators: tuple[Accelerator, ...] = ()
    board: Board | None = None
    libraries: dict[str, str] = Field(
        default_factory=dict, description="versions of the native libraries the kernels used"
    )
    in_container: bool = False
    probe_notes: tuple[str, ...] = Field((), description="what could not be read, and why")


class VendorFields(_Model):
    """Typed in by the submitter (`deepbench submit --submitter ... --system-name ...`), never measured."""

    submitter: str = ""
    system_name: str = ""
    notes: str = ""


class SystemDescription(_Model):
    schema_version: Literal["deepbench.system/1"] = SYSTEM_SCHEMA
    collected_at: datetime
    measured: MeasuredSystem
    vendor: VendorFields = Field(default_factory=VendorFields)


# ----- collection ----------------------------------------------------------------------------
def collect_system(libraries: dict[str, str] | None = None) -> SystemDescription:
    """Describe the machine this process runs on; `libraries` are the backend's library versions."""
    notes: list[str] = []
    accelerators: list[Accelerator] = []
    for probe in (_nvidia, _amd):
        accelerators.extend(_guarded(probe, notes))
    seen_vendors = {a.vendor for a in accelerators}
    accelerators.extend(a for a in _guarded(_sysfs_pci, notes) if a.vendor not in seen_vendors)
    measured = MeasuredSystem(
        cpu=_cpu(),
        memory_gib=_memory_gib(),
        os=_os(),
        accelerators=tuple(accelerators),
        board=_board(),
        libraries=dict(libraries or {}),
        in_container=_in_container(),
        probe_notes=tuple(notes),
    )
    return SystemDescription(collected_at=datetime.now(timezone.utc), measured=measured)


def _guarded(probe: Callable[[list[str]], list[Accelerator]], notes: list[str]) -> list[Accelerator]:
    """A probe that raises leaves a note, never a crash: a description with a gap beats no run."""
    try:
        return probe(notes)
    except Exception as exc:  # noqa: BLE001 - vendor tools fail in many ways; say which
        notes.append(f"{probe.__name__.strip('_')}: {type(exc).__name__}: {exc}"[:300])
        return []


def cpu_model() -> str:
    """The first 'model name' / 'Hardware' / 'cpu model' line of /proc/cpuinfo (the rule the CPU
    backends use for their device name, so the two can be compared), else platform.processor()."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _cpu() -> Cpu:
    cores: set[tuple[str, str]] = set()
    sockets: set[str] = set()
    physical = core = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip().lower(), value.strip()
                if key == "physical id":
                    physical = value
                    sockets.add(value)
                elif key == "core id":
                    core = value
                elif not key and physical and core:
                    cores.add((physical, core))
                    physical = core = ""
    except OSError:
        pass
    if physical and core:
        cores.add((physical, core))
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = None
    return Cpu(
        model=cpu_model(),
        architecture=platform.machine(),
        logical_cpus=os.cpu_count(),
        usable_cpus=usable,
        physical_cores=len(cores) or None,
        sockets=len(sockets) or None,
        max_mhz=_cpu_max_mhz(),
    )


def _cpu_max_mhz() -> float | None:
    text = _read_text(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"))
    try:
        return round(int(text) / 1000, 1) if text else None
    except ValueError:
        return None


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) * 1024 / GIB, 2)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _os() -> OperatingSystem:
    name = platform.system()
    release = _read_text(Path("/etc/os-release")) or ""
    for line in release.splitlines():
        if line.startswith("PRETTY_NAME="):
            name = line.split("=", 1)[1].strip().strip('"')
    libc = " ".join(x for x in platform.libc_ver() if x)
    return OperatingSystem(name=name, kernel=platform.release(), libc=libc, python=platform.python_version())


def _board() -> Board | None:
    for path in DEVICE_TREE_MODELS:
        text = _read_text(path)
        if text:
            return Board(model=text.strip("\x00").strip())
    return None


def _in_container() -> bool:
    return os.path.exists("/.dockerenv") or os.environ.get("DEEPBENCH_IN_CONTAINER") == "1"


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def _run(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=True).stdout


# ----- NVIDIA: NVML through pynvml (nvidia-ml-py), else nvidia-smi ----------------------------------
def _nvidia(notes: list[str]) -> list[Accelerator]:
    try:
        import pynvml
    except ImportError:
        pynvml = None
    if pynvml is not None:
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound etc.: no NVIDIA driver here
            if shutil.which("nvidia-smi"):
                notes.append(f"nvml: {exc}; used nvidia-smi")
                return _nvidia_smi()
            return []
        try:
            return _nvml(pynvml)
        finally:
            pynvml.nvmlShutdown()
    return _nvidia_smi() if shutil.which("nvidia-smi") else []


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _nvml(nv: Any) -> list[Accelerator]:
    def get(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - a query this GPU or driver does not support stays empty
            return None

    driver = _text(get(nv.nvmlSystemGetDriverVersion) or "")
    cuda = get(nv.nvmlSystemGetCudaDriverVersion_v2) or get(nv.nvmlSystemGetCudaDriverVersion)
    out = []
    for i in range(nv.nvmlDeviceGetCount()):
        h = nv.nvmlDeviceGetHandleByIndex(i)
        mem = get(nv.nvmlDeviceGetMemoryInfo, h)
        clocks = {
            name: float(v)
            for name, v in (
                ("max_sm", get(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM)),
                ("max_memory", get(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM)),
                ("sm", get(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)),
                ("memory", get(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM)),
            )
            if v
        }
        vbios = get(nv.nvmlDeviceGetVbiosVersion, h)
        firmware = {"vbios": _text(vbios)} if vbios else {}
        if cuda:
            firmware["cuda_driver_api"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
        power = get(nv.nvmlDeviceGetEnforcedPowerLimit, h)
        pci = get(nv.nvmlDeviceGetPciInfo, h)
        out.append(
            Accelerator(
                vendor="nvidia",
                index=i,
                name=_text(nv.nvmlDeviceGetName(h)),
                memory_gib=round(mem.total / GIB, 2) if mem else None,
                driver=driver,
                firmware=firmware,
                clocks_mhz=clocks,
                power_limit_w=power / 1000 if power else None,
                pci_bus_id=_text(pci.busId) if pci else "",
                source="nvml",
            )
        )
    return out


NVIDIA_SMI_FIELDS = (
    "index",
    "name",
    "memory.total",
    "driver_version",
    "vbios_version",
    "clocks.max.sm",
    "clocks.max.memory",
    "power.limit",
    "pci.bus_id",
)


def _nvidia_smi() -> list[Accelerator]:
    text = _run(["nvidia-smi", f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}", "--format=csv,noheader,nounits"])
    out = []
    for line in text.strip().splitlines():
        f = dict(zip(NVIDIA_SMI_FIELDS, (x.strip() for x in line.split(",")), strict=False))
        out.append(
            Accelerator(
                vendor="nvidia",
                index=int(f["index"]),
                name=f["name"],
                memory_gib=_num(f.get("memory.total"), 2**20 / GIB),
                driver=f.get("driver_version", ""),
                firmware={"vbios": f["vbios_version"]} if _known(f.get("vbios_version")) else {},
                clocks_mhz={
                    k: v
                    for k, v in (
                        ("max_sm", _num(f.get("clocks.max.sm"))),
                        ("max_memory", _num(f.get("clocks.max.memory"))),
                    )
                    if v
                },
                power_limit_w=_num(f.get("power.limit")),
                pci_bus_id=f.get("pci.bus_id", ""),
                source="nvidia-smi",
            )
        )
    return out


def _known(text: str | None) -> bool:
    return bool(text) and text not in ("[N/A]", "N/A", "[Not Supported]")


def _num(text: Any, scale: float = 1.0) -> float | None:
    try:
        return round(float(text) * scale, 2)
    except (TypeError, ValueError):
        return None


# ----- AMD: amdsmi, else rocm-smi ---------------------------------------------------------------
def _amd(notes: list[str]) -> list[Accelerator]:
    try:
        import amdsmi
    except ImportError:
        amdsmi = None
    if amdsmi is not None:
        try:
            amdsmi.amdsmi_init()
        except Exception as exc:  # noqa: BLE001 - no amdgpu driver loaded
            notes.append(f"amdsmi: {exc}")
        else:
            try:
                return _amdsmi(amdsmi)
            finally:
                amdsmi.amdsmi_shut_down()
    return _rocm_smi() if shutil.which("rocm-smi") else []


def _amdsmi(a: Any) -> list[Accelerator]:
    def get(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - a query this GPU or library version lacks stays empty
            return None

    out = []
    for i, h in enumerate(a.amdsmi_get_processor_handles()):
        asic = get(a.amdsmi_get_gpu_asic_info, h) or {}
        vram = get(a.amdsmi_get_gpu_vram_info, h) or {}
        driver = get(a.amdsmi_get_gpu_driver_info, h) or {}
        vbios = get(a.amdsmi_get_gpu_vbios_info, h) or {}
        bdf = get(a.amdsmi_get_gpu_device_bdf, h) or ""
        size_mb = vram.get("vram_size") or vram.get("vram_size_mb")
        out.append(
            Accelerator(
                vendor="amd",
                index=i,
                name=str(asic.get("market_name") or asic.get("asic_name") or "AMD GPU"),
                memory_gib=_num(size_mb, 2**20 / GIB),
                driver=str(driver.get("driver_version", "")),
                firmware={"vbios": str(vbios["version"])} if vbios.get("version") else {},
                pci_bus_id=str(bdf),
                source="amdsmi",
            )
        )
    return out


def _rocm_smi() -> list[Accelerator]:
    data = json.loads(
        _run(["rocm-smi", "--showproductname", "--showmeminfo", "vram", "--showdriverversion", "--showvbios", "--json"])
    )
    driver = str(data.get("system", {}).get("Driver version", ""))
    out = []
    for i, (card, f) in enumerate(sorted((k, v) for k, v in data.items() if k.startswith("card"))):
        vram = f.get("VRAM Total Memory (B)")
        out.append(
            Accelerator(
                vendor="amd",
                index=i,
                name=str(f.get("Card Series") or f.get("Card series") or f.get("Card model") or card),
                memory_gib=_num(vram, 1 / GIB),
                driver=driver,
                firmware={"vbios": str(f["VBIOS version"])} if f.get("VBIOS version") else {},
                source="rocm-smi",
            )
        )
    return out


# ----- any vendor, from sysfs: when no vendor tool is installed (Intel GPUs, bare containers) ---------
def _sysfs_pci(notes: list[str]) -> list[Accelerator]:
    root = Path("/sys/bus/pci/devices")
    if not root.is_dir():
        return []
    out: list[Accelerator] = []
    for dev in sorted(root.iterdir()):
        cls, vendor = _read_text(dev / "class") or "", _read_text(dev / "vendor") or ""
        if vendor not in PCI_VENDORS or not cls.startswith(PCI_ACCELERATOR_CLASSES):
            continue
        kind = PCI_VENDORS[vendor]
        driver = (dev / "driver").resolve().name if (dev / "driver").exists() else ""
        device_id = _read_text(dev / "device") or "?"
        index = sum(1 for a in out if a.vendor == kind)
        out.append(
            Accelerator(
                vendor=kind,
                index=index,
                name=f"{kind} PCI device {device_id}",
                driver=driver,
                pci_bus_id=dev.name,
                source="sysfs",
            )
        )
    return out


CGROUP_MOUNT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")
# (folder under the mount, file) of a memory limit: cgroup v2's, then v1's memory controller's
CGROUP_MEMORY_FILES = (("", "memory.max"), ("memory", "memory.limit_in_bytes"))


def cgroup_memory_limit_bytes(mount: Path = CGROUP_MOUNT, self_cgroup: Path = SELF_CGROUP) -> int | None:
    """The tightest memory limit on this process's cgroup and its ancestors (a container's `--memory`),
    cgroup v2 or v1; None where none can be read (v2 writes "max" for none; v1 a number beyond any
    machine's memory). Written by hand: the standard library and psutil read the machine's memory, not
    the cgroup's. A container sees its own cgroup at the mount's root, a host process the whole tree,
    where /proc/self/cgroup names its own: both places are read."""
    paths = {PurePosixPath("/")}
    for line in (_read_text(self_cgroup) or "").splitlines():
        controllers, _, named = line.partition(":")[2].partition(":")  # "ID:CONTROLLERS:PATH"
        if controllers in ("", "memory") and named.startswith("/"):
            paths |= {PurePosixPath(named), *PurePosixPath(named).parents}
    limits = []
    for folder, name in CGROUP_MEMORY_FILES:
        for path in paths:
            value = _read_text(mount / folder / path.relative_to("/") / name)
            if value and value.isdigit():
                limits.append(int(value))
    return min(limits, default=None)


def usable_memory_bytes() -> int:
    """The host memory this process can have: the machine's, or its cgroup's limit where lower."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = cgroup_memory_limit_bytes()
    return physical if limit is None else min(physical, limit)


def last_level_cache_bytes(cpu: int = 0, root: Path = Path("/sys/devices/system/cpu")) -> int | None:
    """Size of the highest-level data or unified cache of `cpu` (sysfs), e.g. an L3's 32 MiB:
    what a memory-bound kernel's data must exceed to be read from DRAM."""
    best: tuple[int, int] | None = None
    for index in sorted((root / f"cpu{cpu}" / "cache").glob("index*")):
        level, kind, size = (_read_text(index / name) for name in ("level", "type", "size"))
        if not (level and level.isdigit() and size) or kind == "Instruction":
            continue
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        try:
            nbytes = int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
        except ValueError:
            continue
        if best is None or int(level) > best[0]:
            best = (int(level), nbytes)
    return best[1] if best else None
