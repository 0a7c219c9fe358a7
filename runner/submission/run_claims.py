"""What a run says of where it ran and how quiet it was, held to each other and to the system description.

The device: `settings.device` decides which directions a backend times (a CPU's RNN backward passes are
not optional, a GPU's may be: timed_directions.py) and how an RNN's FLOPs are counted, so a CPU bundle
relabelled `cuda` in its plan and run would have its backward passes made optional. The platform names
the device kind it runs on (runner/platforms.py), the harness records the device it found (run.json's
`device`: its kind and name) and the system description lists the machine's CPU, board and accelerators:
they must agree.

The noise record (run.json's `noise`, kernels/noise.py): the cores other processes kept busy during the
run follow from its two snapshots of /proc/stat, and its warnings from those figures; both are re-derived,
and its warnings are the checker's too (so --strict refuses a run its own record calls doubtful). That is
the run-wide witness of contention beside each measurement's `others_cores`, which a bundle cannot prove:
a laundered kernel whose `others_cores` were zeroed still sits in a run whose record saw the others."""

from __future__ import annotations

import math

from ...kernels.noise import OTHERS_CORES_WARN, NoiseRecord, others_cores
from ...kernels.system import SystemDescription
from ..platforms import PLATFORMS
from . import layout
from .check_report import Bundle, Report

# run.json's device.kind, as the harness's backends write it -> the device type it is (Settings.device's).
KIND_TYPES = {"cpu": "cpu", "cuda": "cuda", "gpu": "cuda"}
GPU_TYPE = "cuda"
CPU_DEVICE = "cpu"
OTHERS_RTOL = 1e-9  # the record's figure is the same arithmetic on the same numbers
OTHERS_WARNING = "other processes kept"  # the start of noise.judge's warning about the others' cores
BUSY_WARNING = "the machine was busy when the run started"  # ... and of its load-average warning


def device_type(device: str) -> str:
    """Settings.device's type: "cuda:1" -> "cuda"."""
    return device.split(":", 1)[0]


def check_device(b: Bundle, report: Report) -> None:
    """The device in settings, plan and run against the platform's and the system description's."""
    plan, run = b.plan, b.run
    if plan is None:
        return
    kind = device_type(plan.settings.device)
    platform = PLATFORMS.get(plan.platform)
    if platform is None:
        report.add(layout.PLAN, f"platform {plan.platform!r} is none this tool has ({', '.join(PLATFORMS)})")
    elif kind != platform.device:
        report.add(
            layout.PLAN,
            f"settings.device {plan.settings.device!r} is not a device of platform {plan.platform!r}, which runs "
            f"on {platform.device!r} (runner/platforms.py)",
        )
    if run is None:
        return
    recorded = run.device.get("kind") if isinstance(run.device, dict) else None
    if isinstance(recorded, str) and recorded in KIND_TYPES and KIND_TYPES[recorded] != kind:
        report.add(
            layout.RUN,
            f"the harness found a {recorded!r} device (run.json device.kind), but the settings say "
            f"{plan.settings.device!r}",
        )
    sysd = b.system or run.system
    name = run.device.get("name") if isinstance(run.device, dict) else None
    if sysd is not None and isinstance(name, str) and name:
        _check_named(sysd, name, kind, report)


def _check_named(sysd: SystemDescription, name: str, kind: str, report: Report) -> None:
    """The recorded device's name among what the system description has of that kind."""
    m = sysd.measured
    accelerators = {a.name for a in m.accelerators}
    hosts = {m.cpu.model, *([m.board.model] if m.board else [])}
    names = accelerators if kind == GPU_TYPE else hosts
    if name not in names:
        what = "accelerators" if kind == GPU_TYPE else "CPU or board"
        report.add(
            layout.SYSTEM,
            f"the run's {kind} device {name!r} is none of the system's {what} ({', '.join(sorted(names)) or 'none'})",
        )


def check_noise(b: Bundle, report: Report) -> None:
    """The noise record's figures and warnings re-derived from its snapshots; its warnings shown."""
    run, plan = b.run, b.plan
    if run is None or run.noise is None:
        return
    noise = run.noise
    cpu_run = plan is None or plan.settings.device == CPU_DEVICE  # as the harness judges it (harness/__main__.py)
    shared = plan is not None and plan.settings.ranks > 1 and cpu_run  # several ranks share the CPUs
    derived = None if noise.after is None or shared else others_cores(noise.before, noise.after)
    if not _same(noise.others_cpu_cores, derived):
        report.add(
            layout.RUN,
            f"noise.others_cpu_cores {noise.others_cpu_cores!r} does not follow from its snapshots "
            f"(/proc/stat's busy and own seconds give {derived!r})",
        )
    gpu_run = not cpu_run
    for start, due in (
        (OTHERS_WARNING, _others_due(noise, gpu_run)),
        (BUSY_WARNING, _busy_due(noise)),
    ):
        said = any(w.startswith(start) for w in noise.warnings)
        if said != due:
            state = "missing" if due else "there"
            report.add(layout.RUN, f"noise: the warning '{start} ...' is {state}, but its own figures say otherwise")
    for w in noise.warnings:
        report.warn(layout.RUN, f"the run's noise record: {w}")


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=OTHERS_RTOL, abs_tol=1e-12)


def _others_due(noise: NoiseRecord, gpu_run: bool) -> bool:
    """noise.judge's rule: the others kept more cores busy than the run left spare, by OTHERS_CORES_WARN."""
    if noise.others_cpu_cores is None:
        return False
    needed = 1 if gpu_run else (noise.threads or len(noise.cpus))
    spare = max(0, len(noise.cpus) - needed)
    return noise.others_cpu_cores > spare + OTHERS_CORES_WARN


def _busy_due(noise: NoiseRecord) -> bool:
    load = noise.before.cpu.load_avg
    return bool(load) and load[0] > len(noise.cpus)  # type: ignore[index]
