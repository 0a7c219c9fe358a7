"""What reports and comparisons read: a measured run or a published reference, as one shape.

A `Source` is a list of `Entry` (one kernel in one precision) plus the specs and measured
ceilings it came with. Runs keep their raw samples (comparisons use them for their noise);
references keep one published figure per direction and no samples. Everything downstream
(tables, workbooks, HTML, compare, fastest) takes Sources, so a reference is usable wherever a
run is.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from deepbench.kernels.backends.collectives.declaration import CollectiveInfo, CollectivePartInfo
from deepbench.kernels.backends.contract.declaration import info_of
from deepbench.kernels.catalog import Kernel, traits_of
from deepbench.kernels.format_versions import FormatVersionError, read_model
from deepbench.kernels.noise import NoiseRecord
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import RESULTS_FILE, RUN_FILE, KernelResult, RunRecord, Settings, Status
from deepbench.kernels.results_file import exists, read_results

from ..backend_options import shown as backend_options_shown
from ..errors import UserError
from .references import Reference, find_reference
from .result_extras import result_extras

MS = 1e3  # microseconds per millisecond
# Published times are rounded to 1 us (DeepBench truncated to whole microseconds, the workbooks
# show 0.001 ms): the only spread a reference figure is known to have.
PUBLISHED_RESOLUTION_US = 1.0
SUITE_SET = {"train": "train", "inference-server": "inference_server", "inference-device": "inference_device"}


def precision_order(name: str) -> int:
    """Report order of precisions: the enum's (fp32 first), unknown names last."""
    names = [p.value for p in Precision]
    return names.index(name) if name in names else len(names)


@dataclass(frozen=True)
class Entry:
    """One kernel in one precision from one source."""

    kernel: Kernel
    precision: str
    precision_text: str
    status: str
    reason: str = ""
    median_us: float | None = None
    p25_us: float | None = None
    p75_us: float | None = None
    n: int = 0
    parts_us: dict[str, float] = field(default_factory=dict)
    part_samples: dict[str, tuple[float, ...]] = field(default_factory=dict)
    flops: float = 0.0
    min_bytes: float = 0.0
    tflops: float | None = None
    gbps: float | None = None
    check: str = ""
    flags: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == Status.OK.value and self.median_us is not None

    @property
    def rel_iqr(self) -> float | None:
        if self.p25_us is None or self.p75_us is None or not self.median_us:
            return None
        return (self.p75_us - self.p25_us) / self.median_us

    def key(self, by: str) -> tuple:
        """Identity across sources: the kernel id (same catalog) or DeepBench's parameters (any
        set), with the precision; all-reduce also by rank count where a source knows it."""
        ident: tuple = (self.kernel.id,) if by == "id" else (self.kernel.op, *self.kernel.params().items())
        if traits_of(self.kernel.op).collective:
            ident = (*ident, self.extra.get("ranks"))
        return (*ident, self.precision)


@dataclass(frozen=True)
class Source:
    label: str
    kind: str  # "run" or "reference"
    entries: tuple[Entry, ...]
    specs: dict[str, str]
    ceilings: dict[str, float]
    set: str | None = None  # DeepBench's set when the source is one (train, inference_server ...)
    path: str = ""
    noise: NoiseRecord | None = None  # how quiet the machine was (runs that recorded it)
    named: bool = False  # the user named it (LABEL=FOLDER): its label is kept as given

    @property
    def warnings(self) -> tuple[str, ...]:
        """What makes the source's figures doubtful (a loaded machine ...), for every report."""
        return self.noise.warnings if self.noise else ()


def _check_text(r: KernelResult) -> str:
    c = r.check
    if c is None:
        return ""
    if c.tolerance == 0 and c.passed:
        return "pass exact"
    err = "" if c.error is None else f" {c.error:.0e}<{c.tolerance:.0e}" if c.passed else f" {c.error:.0e}"
    return f"{'pass' if c.passed else 'FAIL'}{err}"


def entry_of_result(r: KernelResult) -> Entry:
    collective = info_of(CollectiveInfo, r.info) if traits_of(r.op).collective else None
    extra: dict[str, Any] = {"padding": r.padding} if r.padding else {}
    if collective and collective.ranks is not None:
        extra["ranks"] = collective.ranks
    parts = [info_of(CollectivePartInfo, p.info) for p in r.parts] if collective else []
    busbw = [p.busbw_gbps for p in parts if p is not None and p.busbw_gbps is not None]
    if busbw:
        extra["busbw_gbps"] = busbw[0]  # the first (in-place) part, the one the time is of
    twin = collective.out_of_place.median if collective and collective.out_of_place else None
    if twin is not None:  # an all-reduce's out-of-place time, beside the kernel's in-place time
        extra["out_of_place_us"] = twin
    for key, info_key in traits_of(r.op).entry_extras:  # the operation's own figures (sparse GEMM's speed-up)
        if r.info.get(info_key) is not None:
            extra[key] = r.info[info_key]
    extra.update(result_extras(r))  # inputs and clocks, for like_for_like.py
    t = r.time_us
    return Entry(
        kernel=r.kernel,
        precision=r.precision.name.value,
        precision_text=r.precision.description,
        status=r.status.value,
        reason=r.reason,
        median_us=t.median if t else None,
        p25_us=t.p25 if t else None,
        p75_us=t.p75 if t else None,
        n=t.n if t else 0,
        parts_us={p.direction: p.measurement.stats.median for p in r.parts},
        part_samples={p.direction: p.measurement.samples_us for p in r.parts},
        flops=sum(p.flops for p in r.parts),
        min_bytes=sum(p.min_bytes for p in r.parts),
        tflops=r.tflops,
        gbps=r.gbps,
        check=_check_text(r),
        flags=r.flags,
        extra=extra,
    )


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif value not in (None, "", [], {}):
        out[prefix] = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


# Settings that mean something only on a GPU: a CPU run's specs leave them out.
GPU_ONLY_SETTINGS = frozenset(
    name for name, f in Settings.model_fields.items() if "GPU" in (f.description or "") and name != "device"
)


def settings_shown(settings: Settings) -> dict[str, Any]:
    values = settings.model_dump(exclude={"backend_options"})  # shown below, as each backend shows them
    if settings.device == "cpu":
        values = {k: v for k, v in values.items() if k not in GPU_ONLY_SETTINGS}
    values["backend_options"] = backend_options_shown(settings, settings.device)
    return values


def noise_specs(noise: NoiseRecord | None) -> dict[str, Any]:
    """The noise record's figures a reader wants beside the specs (the snapshots stay in run.json)."""
    if noise is None:
        return {}
    after = noise.after.cpu if noise.after else None
    return {
        "others_cpu_cores": None if noise.others_cpu_cores is None else round(noise.others_cpu_cores, 2),
        "load_avg_before": noise.before.cpu.load_avg,
        "load_avg_after": after.load_avg if after else None,
        "governors": ", ".join(f"{g} ({n} CPUs)" for g, n in noise.before.cpu.governors.items()),
        "turbo": noise.before.cpu.turbo,
        "warnings": list(noise.warnings),
        "notes": list(noise.notes),
    }


def read_run_folder(path: Path) -> tuple[list[KernelResult], RunRecord | None]:
    """The results and run record (None if absent) of a deepbench-run folder; mistakes (no folder,
    no results, malformed files) are one-line UserErrors."""
    if not path.is_dir():
        raise UserError(f"no results folder at {path} (give the folder deepbench-run wrote, with {RESULTS_FILE})")
    results_file = path / RESULTS_FILE
    if not exists(results_file):
        raise UserError(f"{path} has no {RESULTS_FILE}: not a deepbench-run results folder")
    try:
        results = read_results(results_file)
    except FormatVersionError as exc:
        raise UserError(f"{path}/{exc}") from None
    except ValueError as exc:
        first = str(exc).strip().splitlines()
        raise UserError(f"{results_file} is malformed: {first[0] if first else exc}") from None
    run = None
    if (path / RUN_FILE).exists():
        try:
            run = read_model(RunRecord, (path / RUN_FILE).read_bytes(), str(path / RUN_FILE))
        except FormatVersionError as exc:
            raise UserError(str(exc)) from None
        except (ValidationError, ValueError) as exc:
            raise UserError(f"{path / RUN_FILE} is malformed: {str(exc).splitlines()[0]}") from None
    if not results:
        raise UserError(f"{results_file} holds no results")
    return results, run


def load_run(path: Path) -> Source:
    """A results folder written by deepbench-run; mistakes are one-line UserErrors."""
    results, run = read_run_folder(path)
    specs: dict[str, str] = {}
    if run:
        _flatten(
            "",
            {
                "run": {
                    "id": run.run_id,
                    "suite": run.suite,
                    "platform": run.platform,
                    "backend": run.backend,
                    "state": run.state,
                    "started": run.started_at.isoformat(),
                    "command": run.command,
                    "tool": run.tool_version,
                },
                "device": run.device,
                "host": run.host,
                "software": run.software,
                "settings": settings_shown(run.settings),
                "ceilings": run.ceilings,
                "noise": noise_specs(run.noise),
            },
            specs,
        )
    libraries: dict[str, str] = {}
    for r in results:
        libraries.update(r.library)
    _flatten("library", libraries, specs)
    label = run.run_id if run else path.name
    return Source(
        label=label,
        kind="run",
        entries=tuple(entry_of_result(r) for r in results),
        specs=specs,
        ceilings=dict(run.ceilings) if run else {},
        set=SUITE_SET.get(run.suite) if run else None,
        path=str(path),
        noise=run.noise if run else None,
    )


def _min_bytes(kernel: Kernel, directions: dict, precision: str) -> float:
    try:
        p = Precision(precision)
    except ValueError:
        return 0.0
    return sum(kernel.min_bytes(d, p) for d in directions if d in kernel.DIRECTIONS)


def entries_of_reference(ref: Reference) -> tuple[Entry, ...]:
    out = []
    for e in ref.entries:
        k = e.kernel
        parts = {d: t * MS for d, t in e.times_ms.items()}
        total = e.total_ms * MS if e.total_ms is not None else None
        half = PUBLISHED_RESOLUTION_US / 2
        out.append(
            Entry(
                kernel=k,
                precision=e.precision,
                precision_text=e.precision_text,
                status=e.status,
                reason=e.reason,
                median_us=total,
                p25_us=None if total is None else total - half,
                p75_us=None if total is None else total + half,
                n=1 if total else 0,
                parts_us=parts,
                flops=sum(k.flops(d) for d in parts if d in k.DIRECTIONS),  # 0 for what is rated in bytes
                min_bytes=_min_bytes(k, parts, e.precision),
                tflops=e.throughput.get("tflops"),
                gbps=e.throughput.get("gbps"),
                check="published",
                extra={**e.extra, "sheet": e.sheet, "row": e.row},
            )
        )
    return tuple(out)


def reference_source(ref: Reference) -> Source:
    specs = {f"published.{k}": v for k, v in ref.specs.items()}
    specs.update(
        {"reference.name": ref.name, "reference.source": ref.source, **{f"sheet.{s}": t for s, t in ref.sheets.items()}}
    )
    return Source(
        label=f"DeepBench {ref.processor}",
        kind="reference",
        entries=entries_of_reference(ref),
        specs=specs,
        ceilings={},
        set=ref.set,
        path=ref.name,
    )


def load_source(spec: str, prefer_set: str | None = None) -> Source:
    """A results folder, or a reference as `ref:NAME` (or a bare NAME when no such folder exists);
    `LABEL=SPEC` names it in tables (H200=deepbench-results/RUN_ID) instead of its run id."""
    label, sep, rest = spec.partition("=")
    if sep and label and rest and "/" not in label and not Path(spec).exists():
        return replace(load_source(rest, prefer_set), label=label, named=True)
    if spec.startswith("ref:"):
        return reference_source(find_reference(spec[4:], prefer_set))
    path = Path(spec)
    if path.exists() or ("/" in spec and spec.split("/")[0] not in ("train", "server", "device")):
        return load_run(path)
    try:
        return reference_source(find_reference(spec, prefer_set))
    except UserError:
        raise UserError(
            f"no results folder at {spec}, and no reference of that name (see deepbench references)"
        ) from None


# Words of a device's name that say who made it, not which it is ("NVIDIA H100 80GB HBM3" is "H100").
VENDOR_WORDS = frozenset({"nvidia", "amd", "intel", "instinct", "radeon", "geforce", "tesla", "arm", "apple"})
# Words of a CPU's name that say what it is, not which ("Intel(R) Xeon(R) Processor" is "Xeon").
GENERIC_WORDS = frozenset({"processor", "cpu", "core", "device", "graphics", "accelerator", "gpu", "with"})
TRADEMARKS = ("(R)", "(r)", "(TM)", "(tm)", "®", "™")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _words(name: str) -> list[str]:
    """The words of a device's name less their trademark marks ("Xeon(R)" is "Xeon")."""
    for mark in TRADEMARKS:
        name = name.replace(mark, "")
    return name.split()


def short_device(name: str) -> str | None:
    """The model in a device's name: its first word with both letters and digits that is not a
    vendor's word, a memory size or a core count ("NVIDIA H100 80GB HBM3" -> "H100", "AMD Instinct
    MI300X" -> "MI300X"); else its family, the first capitalised word that is neither a vendor's nor
    a generic one, with the number that follows it ("Intel(R) Xeon(R) Processor" -> "Xeon", "AMD EPYC
    7763 64-Core Processor" -> "EPYC 7763"); None when the name has neither ("synthetic device")."""
    words = _words(name)
    for word in words:
        low = word.lower()
        if low in VENDOR_WORDS or low.rstrip("b").rstrip("gm").isdigit() or low.endswith("-core"):
            continue
        if any(c.isalpha() for c in word) and any(c.isdigit() for c in word):
            return word
    for i, word in enumerate(words):
        if word[:1].isupper() and word.isalpha() and word.lower() not in VENDOR_WORDS | GENERIC_WORDS:
            number = words[i + 1] if i + 1 < len(words) and words[i + 1][:1].isdigit() else ""
            return f"{word} {number}" if number and not number.lower().endswith("-core") else word
    return None


def short_labels(sources: list[Source]) -> list[Source]:
    """Short, unique labels for tables and headings (an 80-column table has room for "Xeon (us)", not
    for "20261201-223632-cpu-smoke (us)"): a run's device model ("H100") or family ("Xeon"), or its run
    id when the device's name has neither; sources the user named (LABEL=FOLDER) keep their names.
    Labels still equal get " A", " B" ... in the order given ("H100 A", "H100 B"); the headings name
    each label's folder. Two equal names the user gave are a usage error."""
    labels = []
    for s in sources:
        device = s.specs.get("device.name", "") if s.kind == "run" and not s.named else ""
        labels.append(short_device(device) or s.label if device else s.label)
    named = [s.label for s in sources if s.named]
    if len(set(named)) != len(named):
        raise UserError(f"two sources are named the same: {', '.join(named)} (give each LABEL=FOLDER a new label)")
    counts = {lab: labels.count(lab) for lab in labels}
    seen: dict[str, int] = {}
    out = []
    for s, lab in zip(sources, labels, strict=True):
        if counts[lab] > 1 and not s.named:
            seen[lab] = seen.get(lab, 0) + 1
            lab = f"{lab} {LETTERS[(seen[lab] - 1) % len(LETTERS)]}"
        out.append(replace(s, label=lab))
    return out


def label_line(sources: list[Source]) -> str:
    """Each label with what it stands for, in the LABEL=FOLDER form that names it again."""
    return "sources: " + ", ".join(f"{s.label}={s.path}" for s in sources)
