"""`deepbench submit`: turn a finished run folder into a submission bundle (see layout.py)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...kernels import __version__
from ...kernels.folder_lock import HARNESS_LOCK, RUN_LOCK, describe, peek
from ...kernels.format_versions import FormatVersionError, read_model
from ...kernels.harness.protocol import ExitCode
from ...kernels.results import PLAN_FILE, RESULTS_FILE, RUN_FILE, Plan, RunRecord, utcnow
from ...kernels.results_file import exists, read_bytes, read_results
from ...kernels.system import SystemDescription, VendorFields
from ..backend_options import backend_args
from ..errors import UserError
from ..launch.running.local import LOG_FILE
from ..launch.running.measurement import DEFAULT_KERNEL_TIMEOUT_S
from ..launch.running.modes import MODES
from ..outpaths import check_replaceable, remove_own_files, why_failed
from ..platforms import get_platform
from . import layout
from .image import image_source
from .layout import DEFAULT_LIMITS
from .manifest import LINE, unsafe_path, write_manifest

PARTIAL_SUFFIX = ".partial"  # a bundle is written in .NAME.XXXX.partial, then renamed NAME


def reproduce_command(plan: Plan, local: bool, image_digest: str | None) -> str:
    """The deepbench-run command that makes this plan again (plan.json stays authoritative: the
    verify command runs it exactly, including presets a command line cannot express)."""
    s = plan.settings
    args = ["deepbench-run"]
    args += ["--local"] if local else []
    if not local or plan.platform != "cpu":
        args += ["--platform", plan.platform]
    if not local and image_digest:
        args += ["--image", image_digest]
    if plan.backend != get_platform(plan.platform).backend:
        args += ["--backend", plan.backend]
    args += ["--suite", plan.suite]
    sel = plan.selection
    if sel is not None:
        if sel.ops:
            args += ["--ops", ",".join(sel.ops)]
        for clause in sel.where:
            args += ["--where", clause]
        if sel.limit is not None:
            args += ["--limit", str(sel.limit)]
        if sel.precisions:
            args += ["--precision", ",".join(sel.precisions)]
        for flag, value in (("--batch", getattr(sel, "batch", None)), ("--seq", getattr(sel, "seq", None))):
            if value is not None:
                args += [flag, str(value)]
    if s.mode != "default":
        args.append(f"--{s.mode}")
    preset = MODES[s.mode]
    if s.time_cap_s != preset["time_cap_s"]:
        args += ["--time-cap", f"{s.time_cap_s:g}"]
    if s.target_rel_precision != preset["target_rel_precision"]:
        args += ["--target", f"{s.target_rel_precision:g}"]
    if s.min_sample_s != preset["min_sample_s"]:
        args += ["--min-sample", f"{s.min_sample_s:g}"]
    if s.kernel_timeout_s != DEFAULT_KERNEL_TIMEOUT_S:
        args += ["--kernel-timeout", f"{s.kernel_timeout_s:g}"]
    if s.threads:
        args += ["--threads", str(s.threads)]
    if s.ranks > 1:  # all-reduce over several ranks (on one node here; launch-command spreads them)
        args += ["--ranks", str(s.ranks)]
    args += ["--seed", str(s.seed)]
    args += ["--cold"] if s.cold else []
    args += ["--verify-timing"] if s.verify_timing else []
    args += [] if s.kernel_time else ["--no-kernel-time"]
    args += [] if s.pad == "deepbench" else ["--pad", s.pad]
    args += [] if s.inputs == "normal" else ["--inputs", s.inputs]
    args += ["--energy", "--energy-window", f"{s.energy_window_s:g}"] if s.energy else []
    args += [] if s.lock_clocks is None else ["--lock-clocks", str(s.lock_clocks)]
    args += backend_args(s)
    return shlex.join(args)


def _writer(run_dir: Path) -> dict | None:
    """Who writes the run now (its deepbench-run, or a harness it left), or None; read without a byte
    written (a lock this process may not open shows no writer)."""
    for name in (RUN_LOCK, HARNESS_LOCK):
        try:
            holder = peek(run_dir, name)
        except OSError:
            continue
        if holder is not None:
            return holder
    return None


def _refuse_live(run_dir: Path) -> None:
    """A run still being written is said as such, with what works: --resume refuses a live folder."""
    holder = _writer(run_dir)
    if holder is None:
        return
    pid = holder.get("pid", "PID")
    raise UserError(
        f"the run in {run_dir} is still going: {describe(holder)} writes it; wait for it to end, or stop it "
        f"(kill {pid}: every finished kernel is kept) and finish it with deepbench-run --resume "
        f"{shlex.quote(str(run_dir))}; then submit"
    )


def load_run(run_dir: Path) -> tuple[Plan, RunRecord]:
    """The run's plan and record, validated; a user's mistake is one line."""
    if not run_dir.is_dir():
        raise UserError(f"{run_dir} is not a run folder (give the --out folder of deepbench-run)")
    _refuse_live(run_dir)
    for name in (PLAN_FILE, RUN_FILE, RESULTS_FILE):
        if not exists(run_dir / name):
            raise UserError(f"{run_dir} has no {name}: is it a deepbench-run results folder?")
    try:
        plan = read_model(Plan, (run_dir / PLAN_FILE).read_bytes(), PLAN_FILE)
        record = read_model(RunRecord, (run_dir / RUN_FILE).read_bytes(), RUN_FILE)
    except FormatVersionError as exc:
        raise UserError(f"{run_dir}/{exc}") from None
    except ValueError as exc:
        raise UserError(f"{run_dir}: {str(exc).splitlines()[0]}") from None
    if record.state != "complete":
        raise UserError(
            f"the run in {run_dir} is {record.state}: finish it first "
            f"(deepbench-run --resume {shlex.quote(str(run_dir))})"
        )
    if record.system is None or record.host_system is None:
        raise UserError(f"{run_dir}/run.json has no system description: it was made by an older deepbench; run again")
    return plan, record


def make_bundle(
    run_dir: Path,
    out: Path,
    vendor: VendorFields,
    force: bool = False,
    image_archive: Path | None = None,
    push_to: str | None = None,
    log: Callable[[str], None] = print,
) -> layout.SubmissionIndex:
    """Write the bundle; with `image_archive` / `push_to` the run's image is exported / pushed
    too, and the bundle records where to get it (image.py)."""
    plan, record = load_run(run_dir)
    try:
        read_results(run_dir / RESULTS_FILE)
    except FormatVersionError as exc:
        raise UserError(f"{run_dir}/{exc}") from None
    except ValueError as exc:
        raise UserError(f"{run_dir}/{RESULTS_FILE} is not valid: {str(exc).splitlines()[0]}") from None
    replacing = _existing_output(run_dir, out, force)
    source = image_source(record.provenance.image, image_archive, push_to, log)
    # Written beside the target and renamed when complete: a bundle under its final name is whole.
    staging: Path | None = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=PARTIAL_SUFFIX, dir=out.parent))
        index = _write_bundle(staging, run_dir, plan, record, vendor, source)
    except BaseException as exc:  # a full disk, text no writer takes, a signal: no partial bundle stays
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)  # the tool's own temporary folder, made just above
        if not isinstance(exc, OSError):
            raise
        kept = "" if replacing is None else " (the bundle there is kept)"
        raise UserError(
            f"--out {out}: the bundle could not be written ({why_failed(exc)}); its partial copy was "
            f"removed and nothing was written under {out}{kept}; fix that and submit again",
            exit_code=ExitCode.WRITE_FAILED,
        ) from None
    _publish(staging, out, replacing)
    return index


def _write_bundle(
    out: Path, run_dir: Path, plan: Plan, record: RunRecord, vendor: VendorFields, source: layout.ImageSource | None
) -> layout.SubmissionIndex:
    (out / "logs").mkdir()

    system: SystemDescription = record.system.model_copy(update={"vendor": vendor})  # type: ignore[union-attr]
    local = bool(record.provenance.local) if record.provenance.local is not None else _was_local(run_dir)
    digest = record.provenance.image_digest
    index = layout.SubmissionIndex(
        created_at=utcnow(),
        tool_version=__version__,
        run_id=plan.run_id,
        suite=plan.suite,
        platform=plan.platform,
        backend=plan.backend,
        local=local,
        image_digest=digest,
        image=source,
        reproduce=reproduce_command(plan, local, digest),
        verify=f"deepbench verify BUNDLE{' --local' if local else ''}",
        files=dict(layout.LAYOUT),
    )

    _write_json(out / layout.SYSTEM, system.model_dump(mode="json"))
    if record.host_system is not None:
        _write_json(out / layout.HOST_SYSTEM, record.host_system.model_dump(mode="json"))
    for src, dst in ((PLAN_FILE, layout.PLAN), (RUN_FILE, layout.RUN), (RESULTS_FILE, layout.RESULTS)):
        (out / dst).write_bytes(read_bytes(run_dir / src))  # a run stored compressed goes in plain
    harness_log = run_dir / LOG_FILE
    (out / layout.HARNESS_LOG).write_bytes(harness_log.read_bytes() if harness_log.is_file() else b"")
    (out / layout.README).write_text(readme(plan, record, system, index))
    _write_json(out / layout.INDEX, index.model_dump(mode="json"))
    write_manifest(out)
    return index


def bundle_files(folder: Path) -> set[str] | None:
    """The files a bundle folder's manifest says deepbench submit wrote (the manifest included), or
    None when it holds no readable manifest listing an index (then it is not the tool's bundle)."""
    manifest = folder / layout.MANIFEST
    if not manifest.is_file() or manifest.is_symlink() or manifest.stat().st_size > DEFAULT_LIMITS.max_json_bytes:
        return None
    try:
        text = manifest.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    listed = set()
    for line in filter(None, text.split("\n")):
        m = LINE.match(line)
        if m is None or unsafe_path(m.group(2)):
            return None
        listed.add(m.group(2))
    return listed | {layout.MANIFEST} if layout.INDEX in listed else None


def _existing_output(run_dir: Path, out: Path, force: bool) -> Path | None:
    """What --out holds now: None when nothing (or an empty folder); the folder itself when it is a
    bundle that --force may replace; anything else is refused before a byte is written."""
    if not out.exists() and not out.is_symlink():
        return None
    if out.is_symlink() or not out.is_dir():
        raise UserError(f"--out {out} is not a folder: give a folder (it is created if missing)")
    if not any(out.iterdir()):
        return None
    if not force:
        raise UserError(
            f"{out} exists and is not empty: choose another --out, or --force to replace a bundle "
            "deepbench submit wrote there"
        )
    check_replaceable(out, bundle_files(out), keep=(run_dir,), what="a submission bundle", option="--out")
    return out


def _publish(staging: Path, out: Path, replacing: Path | None) -> None:
    """Rename the complete bundle into place. An old bundle (checked replaceable) is first renamed
    aside, then only the files its manifest lists are removed."""
    if replacing is None:
        if out.is_dir():
            out.rmdir()  # empty (checked): rename replaces no folder that holds anything
        staging.rename(out)
        return
    own = bundle_files(replacing) or set()
    aside = out.parent / f".{out.name}.{os.getpid()}.old"
    out.rename(aside)
    staging.rename(out)
    remove_own_files(aside, own)


def _was_local(run_dir: Path) -> bool:
    marker = run_dir / ".local"
    return marker.is_file() and marker.read_text().strip() == "1"


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")


def readme(plan: Plan, record: RunRecord, system: SystemDescription, index: layout.SubmissionIndex) -> str:
    m = system.measured
    accel = "; ".join(f"{a.name} ({a.memory_gib} GiB, driver {a.driver or '?'})" for a in m.accelerators) or "none"
    libs = ", ".join(f"{k} {v}" for k, v in sorted(m.libraries.items())) or "none recorded"
    counts = ", ".join(f"{n} {s}" for s, n in sorted(record.counts.items()))
    source = record.provenance.source
    image = index.image_digest or ("none (--local: run on the host, no container)" if index.local else "not recorded")
    if index.image and index.image.archive:
        image += f"; archive {index.image.archive.name} (sha256 {index.image.archive.sha256}), beside this bundle"
    if index.image and index.image.registry:
        image += f"; in the registry as {index.image.registry}"
    vendor = system.vendor
    by = (f"Submitted by {vendor.submitter}. " if vendor.submitter else "") + (
        f"System: {vendor.system_name}. " if vendor.system_name else ""
    )
    return f"""# DeepBench submission {plan.run_id}

{by}
{vendor.notes}

| | |
| --- | --- |
| suite | {plan.suite} ({len(plan.items)} kernels x precisions: {counts}) |
| platform / backend | {plan.platform} / {plan.backend} |
| device | {record.device.get("name", "?")} |
| CPU | {m.cpu.model}, {m.cpu.logical_cpus} logical CPUs, {m.memory_gib} GiB |
| accelerators | {accel} |
| board | {m.board.model if m.board else "n/a"} |
| OS / kernel | {m.os.name} / {m.os.kernel} |
| libraries | {libs} |
| image | {image} |
| tool | deepbench {record.tool_version}, harness sha256 {record.provenance.harness_sha256 or "?"} |
| source tree | {source.state if source else "unknown"}{" at " + source.commit if source and source.commit else ""} |
| measured | {record.started_at:%Y-%m-%d %H:%M:%S} to {record.ended_at:%Y-%m-%d %H:%M:%S} UTC |

## Reproduce
```
{index.reproduce}
```
`plan.json` is authoritative (it lists every kernel and setting); to re-run exactly this plan and
compare with these numbers within their measured noise:
```
{index.verify}
```

## Check
```
deepbench check BUNDLE        # schema, manifest, completeness, checks, samples, consistency
sha256sum -c {layout.MANIFEST}   # the manifest alone, without deepbench
```

## Layout
{chr(10).join(f"- `{path}`: {layout.ROLE_TEXT[role]}" for role, path in layout.LAYOUT.items())}
- `{layout.INDEX}`: this bundle's index (schema {layout.SUBMISSION_SCHEMA})
- `{layout.MANIFEST}`: SHA-256 of every other file
"""
