"""Submissions: `deepbench submit` then `check` on a fresh smoke run, tampering caught with a
message naming it, untrusted bundles rejected without a traceback, `verify` agreeing with itself
and flagging altered numbers."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from deepbench.kernels.provenance import items_sha256, package_sha256
from deepbench.kernels.results import KernelResult, Plan, RunRecord, TimeStats
from deepbench.runner.submission.checker import check_bundle
from deepbench.runner.submission.layout import LAYOUT, MANIFEST, Limits
from deepbench.runner.submission.manifest import write_manifest

from .conftest import run_cli

# Generous for a shared 2-core VM: a re-run must agree within a factor 5 (seen here: 3.3x slower
# re-runs at a load average of 10 on 2 cores); numbers altered 10x must be flagged by a factor-3 rule.
# The noise limit is lifted too (relative IQRs of 25-40% were seen here): what unverifiable means is
# tested on exact statistics in tests/test_verify_noise.py.
AGREE_TOLERANCE = ("--tolerance", "4.0", "--max-tolerance", "4.0", "--max-noise", "10")
FLAG_TOLERANCE = ("--tolerance", "2.0", "--max-tolerance", "2.0", "--max-noise", "10")
# Ten times faster: the forgery worth making. (A slower time shows against the stop rule's time cap, which
# check replays: runner/submission/stop_replay.py.)
ALTERED_FACTOR = 0.1
# One thread: two OpenMP threads on a 2-core VM shared with other processes spin at barriers and
# read 10-1000x slower at random, which no tolerance can absorb (seen here: 12 us vs 74 ms).
RUN_ARGS = ("--local", "--suite", "smoke", "--fast", "--threads", "1", "--quiet")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "smoke"
    proc = run_cli("deepbench-run", *RUN_ARGS, "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture(scope="module")
def bundle(smoke_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "b"
    proc = run_cli(
        "deepbench",
        "submit",
        str(smoke_run),
        "--out",
        str(out),
        "--submitter",
        "Test Lab",
        "--system-name",
        "CI virtual machine",
        "--notes",
        "shared 2-core VM",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "check passed" in proc.stdout
    return out


@pytest.fixture
def copy(bundle: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy"
    shutil.copytree(bundle, dst, symlinks=True)
    return dst


def check(path: Path, *extra: str) -> subprocess.CompletedProcess:
    proc = run_cli("deepbench", "check", str(path), *extra, env={"COLUMNS": "400"})
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc


def assert_fails(path: Path, *needles: str) -> str:
    proc = check(path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "check failed" in out
    for needle in needles:
        assert needle in out, f"{needle!r} not in:\n{out}"
    return out


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def write_lines(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def first_ok(records: list[dict]) -> int:
    return next(i for i, r in enumerate(records) if r["status"] == "ok")


# ----- a fresh smoke run, submitted and checked --------------------------------------------------
def test_submit_then_check_passes(bundle: Path, smoke_run: Path) -> None:
    proc = check(bundle)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "check passed" in proc.stdout
    for rel in [*LAYOUT.values(), MANIFEST, "submission.json"]:
        assert (bundle / rel).is_file(), rel
    # The manifest is sha256sum's format: it verifies without deepbench.
    if shutil.which("sha256sum"):
        sums = subprocess.run(["sha256sum", "-c", MANIFEST], cwd=bundle, capture_output=True, text=True)
        assert sums.returncode == 0, sums.stdout + sums.stderr
    readme = (bundle / "README.md").read_text()
    assert "deepbench-run --local --suite smoke --fast --threads 1 --seed 0" in readme
    assert "deepbench verify BUNDLE --local" in readme


def test_run_record_has_provenance_and_system(smoke_run: Path) -> None:
    record = RunRecord.model_validate_json((smoke_run / "run.json").read_text())
    plan = Plan.model_validate_json((smoke_run / "plan.json").read_text())
    prov = record.provenance
    assert len(prov.harness_sha256) == 64 and int(prov.harness_sha256, 16) >= 0
    assert prov.suite_sha256 == items_sha256(plan.items)
    assert prov.frozen_suite_sha256 and prov.runner_sha256
    assert prov.local is True and prov.image is None and prov["image"] is None
    assert prov.seeds == {"inputs": 0} and "--suite smoke" in prov.command
    assert prov.source is not None and prov.source.state in ("clean", "modified", "unknown")
    assert {"harness_started", "recorded"} <= set(prov.timestamps)
    assert plan.selection is not None and plan.selection.ops is None
    system = record.system
    assert system is not None and system.schema_version == "deepbench.system/1"
    assert system.measured.libraries == record.software and "torch" in system.measured.libraries
    assert system.measured.cpu.model == record.device["name"]
    assert system.measured.memory_gib and system.measured.os.kernel
    assert system.vendor.submitter == ""  # vendor fields are filled at submission, never measured
    assert record.host_system is not None


def test_harness_hash_names_the_package_content(tmp_path: Path) -> None:
    src = Path(__import__("deepbench.kernels").kernels.__file__).parent
    pkg = tmp_path / "kernels"
    shutil.copytree(src, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    first = package_sha256(pkg)
    (pkg / "__pycache__").mkdir(exist_ok=True)
    (pkg / "__pycache__" / "x.pyc").write_bytes(b"bytecode is not source")
    assert package_sha256(pkg) == first
    # what an install does not hold is not hashed: a folder that is no package (runner/published) ...
    (pkg / "published").mkdir()
    (pkg / "published" / "run.json").write_text("{}")
    assert package_sha256(pkg) == first
    (pkg / "data" / "extra.json").write_text("{}")  # ... but package data is
    assert package_sha256(pkg) != first
    (pkg / "data" / "extra.json").unlink()
    with (pkg / "costs.py").open("a") as f:
        f.write("# edited\n")
    assert package_sha256(pkg) != first
    (pkg / "costs.py").rename(pkg / "costs2.py")
    assert package_sha256(pkg) not in (first,)


def test_vendor_fields_are_kept_apart(bundle: Path) -> None:
    system = json.loads((bundle / "system.json").read_text())
    assert system["vendor"] == {
        "submitter": "Test Lab",
        "system_name": "CI virtual machine",
        "notes": "shared 2-core VM",
    }
    record = json.loads((bundle / "run.json").read_text())
    assert system["measured"] == record["system"]["measured"]


def test_selected_run_declares_its_scope(tmp_path: Path) -> None:
    run, out = tmp_path / "run", tmp_path / "bundle"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "smoke",
        "--ops",
        "gemm",
        "--limit",
        "1",
        "--fast",
        "--quiet",
        "--out",
        str(run),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run_cli("deepbench", "submit", str(run), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    index = json.loads((out / "submission.json").read_text())
    assert "--suite smoke --ops gemm --limit 1 --fast" in index["reproduce"]
    assert check(out).returncode == 0
    # The plan must hold exactly what the suite + selection stand for: drop its kernel, and the
    # checker says which kernel of the declared scope is missing.
    plan = json.loads((out / "plan.json").read_text())
    dropped = plan["items"].pop()
    (out / "plan.json").write_text(json.dumps(plan))
    write_manifest(out)
    kid = f"{dropped['kernel']['op']}/{dropped['kernel']['set']}/{dropped['kernel']['index']:03d}"
    assert_fails(out, f"kernel {kid}/fp32 of the declared scope", "is a result for a kernel the plan does not hold")


# ----- tampering -----------------------------------------------------------------------------------
def test_changed_time_breaks_the_manifest(copy: Path) -> None:
    records = lines(copy / "results.jsonl")
    records[first_ok(records)]["time_us"]["median"] *= 0.5
    write_lines(copy / "results.jsonl", records)
    assert_fails(copy, "results.jsonl: its SHA-256 differs from the manifest")


def test_changed_time_with_rehashed_manifest(copy: Path) -> None:
    records = lines(copy / "results.jsonl")
    i = first_ok(records)
    records[i]["parts"][0]["measurement"]["stats"]["median"] *= 0.5
    write_lines(copy / "results.jsonl", records)
    write_manifest(copy)
    assert_fails(copy, f"results.jsonl line {i + 1} ({records[i]['id']})", "stats do not match samples_us")


def test_removed_kernel(copy: Path) -> None:
    records = lines(copy / "results.jsonl")
    removed = records.pop(first_ok(records))
    write_lines(copy / "results.jsonl", records)
    write_manifest(copy)
    assert_fails(copy, f"{removed['id']}: has no result in results.jsonl")


def test_edited_system_description(copy: Path) -> None:
    system = json.loads((copy / "system.json").read_text())
    system["measured"]["cpu"]["model"] = "Faster CPU 9000"
    (copy / "system.json").write_text(json.dumps(system))
    assert_fails(copy, "system.json: its SHA-256 differs from the manifest")
    write_manifest(copy)  # a careful forger re-hashes: the run record still disagrees
    assert_fails(
        copy, "system.json: its measured description differs from the one the harness recorded in run.json (cpu)"
    )


def test_vendor_fields_may_be_edited(copy: Path) -> None:
    system = json.loads((copy / "system.json").read_text())
    system["vendor"]["notes"] = "performance governor"
    (copy / "system.json").write_text(json.dumps(system))
    write_manifest(copy)
    assert check(copy).returncode == 0


def test_library_versions_must_match_the_system(copy: Path) -> None:
    records = lines(copy / "results.jsonl")
    i = first_ok(records)
    records[i]["library"]["torch"] = "0.0.1"
    write_lines(copy / "results.jsonl", records)
    write_manifest(copy)
    assert_fails(copy, f"{records[i]['id']}: used libraries {{'torch': '0.0.1'}}")


def test_file_added(copy: Path) -> None:
    (copy / "extra.txt").write_text("not submitted\n")
    assert_fails(copy, "extra.txt: is not in the manifest")


def test_file_removed(copy: Path) -> None:
    (copy / "logs" / "harness.log").unlink()
    assert_fails(copy, "logs/harness.log: is listed in the manifest but missing from the bundle")


@pytest.mark.parametrize("path", ["../outside.json", "/etc/hostname", "logs/../../outside.json"])
def test_path_escaping_the_bundle(copy: Path, path: str) -> None:
    (copy.parent / "outside.json").write_text("{}\n")
    with (copy / MANIFEST).open("a") as f:
        f.write(f"{'0' * 64}  {path}\n")
    assert_fails(copy, f"path {path!r}", "escapes the bundle")


def test_symlinks_are_rejected(copy: Path) -> None:
    real = copy.parent / "results-elsewhere.jsonl"
    shutil.move(copy / "results.jsonl", real)
    (copy / "results.jsonl").symlink_to(real)
    (copy / "logs-link").symlink_to(copy / "logs", target_is_directory=True)
    assert_fails(copy, "results.jsonl: is a symbolic link", "logs-link: is a symbolic link")


def test_malformed_json_and_wrong_types(copy: Path) -> None:
    (copy / "run.json").write_text('{"schema_version": "deepbench.run/1", "run_id": ')
    system = json.loads((copy / "system.json").read_text())
    system["measured"]["cpu"]["logical_cpus"] = "many"
    (copy / "system.json").write_text(json.dumps(system))
    plan = json.loads((copy / "plan.json").read_text())
    plan["schema_version"] = "deepbench.plan/99"
    (copy / "plan.json").write_text(json.dumps(plan))
    with (copy / "results.jsonl").open("a") as f:
        f.write("[1, 2, NaN]\n")
        f.write("[" * 100_000 + "\n")
    write_manifest(copy)
    assert_fails(
        copy,
        "run.json: is not valid JSON",
        "system.json: does not match its schema: measured.cpu.logical_cpus",
        "plan.json: written by a newer deepbench (deepbench.plan/99; this one reads up to /2): upgrade deepbench",
        "non-standard JSON constant NaN",
        "nested too deeply",
    )


def test_oversized_file_is_not_read(copy: Path) -> None:
    size = (copy / "results.jsonl").stat().st_size
    report = check_bundle(copy, Limits(max_file_bytes=size - 1))
    assert any(p.where == "results.jsonl" and "over the limit" in p.message for p in report.problems)


def test_not_a_bundle_is_a_usage_error(tmp_path: Path) -> None:
    proc = check(tmp_path / "nothing")
    assert proc.returncode == 2 and "no bundle at" in proc.stderr


# ----- verify -------------------------------------------------------------------------------------
def scale_times(bundle: Path, factor: float, every: int = 1) -> list[str]:
    """Scale the times of every `every`-th ok kernel by `factor`, consistently (samples, statistics, rates,
    the figures derived from them: a collective's, the harness's derived ratios), and re-hash the manifest:
    only a re-run can tell. Returns the ids altered."""
    from deepbench.kernels.backends.collectives.declaration import collective_figures
    from deepbench.kernels.harness.execute import derived_figures

    records = lines(bundle / "results.jsonl")
    altered = []
    ok = [i for i, raw in enumerate(records) if raw["status"] == "ok"]
    for i, raw in enumerate(records):
        if i not in ok[::every]:
            continue
        r = KernelResult.model_validate(raw)
        parts = []
        for p in r.parts:
            samples = tuple(x * factor for x in p.measurement.samples_us)
            stats = TimeStats.of(samples)
            m = p.measurement.model_copy(update={"samples_us": samples, "stats": stats})
            info = dict(p.info)
            if "algbw_gbps" in info:  # a collective's figures, from the samples (one rank)
                info.update(collective_figures(m, [list(samples)], info["bytes"], info["bus_factor"], r.kernel.repeat))
            parts.append(
                p.model_copy(
                    update={
                        "measurement": m,
                        "info": info,
                        "tflops": p.flops / stats.median / 1e6 if p.tflops is not None else None,
                        "gbps": p.min_bytes / stats.median / 1e3 if p.gbps is not None else None,
                    }
                )
            )
        total = TimeStats.total(p.measurement.stats for p in parts)
        new = r.model_copy(
            update={
                "parts": tuple(parts),
                "time_us": total,
                "tflops": r.tflops / factor if r.tflops else r.tflops,
                "gbps": r.gbps / factor if r.gbps else r.gbps,
                "info": {**r.info, **derived_figures(r.info, total.median)},
            }
        )
        records[i] = json.loads(KernelResult.model_validate_json(new.model_dump_json()).model_dump_json())
        altered.append(r.id)
    write_lines(bundle / "results.jsonl", records)
    write_manifest(bundle)
    return altered


@pytest.mark.slow
def test_verify_agrees_with_itself(bundle: Path, tmp_path: Path) -> None:
    proc = run_cli(
        "deepbench",
        "verify",
        str(bundle),
        "--local",
        "--quiet",
        "--out",
        str(tmp_path / "v"),
        *AGREE_TOLERANCE,
        env={"COLUMNS": "400"},
    )
    report = json.loads((tmp_path / "v" / "verify.json").read_text())
    submitted = lines(bundle / "results.jsonl")
    # A result the submission itself measured while other processes held its CPUs is not judged, by design
    # (verify.py): on a busy 2-core machine that can happen to any of them; nothing else may fail to agree.
    contended = [c for c in report["comparisons"] if c["verdict"] == "unverifiable" and "contended in" in c["reason"]]
    assert proc.returncode == (1 if contended else 0), proc.stdout + proc.stderr
    assert report["disagree"] == 0 and report["agree"] + len(contended) == len(submitted)
    assert "verified" in proc.stdout and ("not verified" in proc.stdout) == bool(contended)
    ok = [c for c in report["comparisons"] if c["ratio"] is not None]
    assert len(ok) + len(contended) == sum(r["status"] == "ok" for r in submitted) >= 9
    assert all(c["tolerance"] == 4.0 for c in ok)


@pytest.mark.slow
def test_verify_flags_altered_numbers(copy: Path, tmp_path: Path) -> None:
    altered = scale_times(copy, ALTERED_FACTOR)
    assert len(altered) >= 9
    assert check(copy).returncode == 0  # consistent and re-hashed: the checker cannot tell
    proc = run_cli(
        "deepbench",
        "verify",
        str(copy),
        "--local",
        "--quiet",
        "--out",
        str(tmp_path / "v"),
        *FLAG_TOLERANCE,
        env={"COLUMNS": "400"},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "v" / "verify.json").read_text())
    # Not agreed: disagree, or not judged because a run was contended (other processes held its CPUs).
    flagged = {
        c["id"]
        for c in report["comparisons"]
        if c["verdict"] == "disagree" or (c["verdict"] == "unverifiable" and "contended" in c["reason"])
    }
    # A loaded VM slows a re-run down (towards the altered numbers), so not every altered kernel
    # need be caught here, but most are; the rule itself is tested exactly in test_tolerance_rule,
    # and unaltered kernels agreeing in test_verify_agrees_with_itself.
    assert len(flagged) > len(altered) / 2, (flagged, altered)
    assert "not verified" in proc.stdout


def test_tolerance_rule() -> None:
    """Quiet kernels must agree within the floor; noisy ones get room in proportion to the noise
    both runs measured; no kernel more than the cap."""
    from deepbench.runner.submission.verify import ToleranceRule, compare

    rule = ToleranceRule(floor=0.10, noise_factor=3.0, cap=1.0, max_noise=10.0)  # no noise limit here
    pairs = {  # id: (submitted median, its rel IQR, re-run median, its rel IQR, verdict)
        "quiet-same": (100.0, 0.01, 105.0, 0.01, "agree"),
        "quiet-off": (100.0, 0.01, 115.0, 0.01, "disagree"),
        "noisy-off": (100.0, 0.20, 150.0, 0.20, "agree"),  # tolerance 3 * 0.28 = 85%
        "noisy-faster": (100.0, 0.20, 200.0, 0.20, "disagree"),  # 100% > 85%
        "very-noisy": (100.0, 2.0, 250.0, 2.0, "disagree"),  # capped at 100%
    }
    submitted = [_synthetic(k, a, ra) for k, (a, ra, _, _, _) in pairs.items()]
    rerun = [_synthetic(k, b, rb) for k, (_, _, b, rb, _) in pairs.items()]
    verdicts = {c.id: c.verdict for c in compare(submitted, rerun, rule)}
    assert verdicts == {k: v[-1] for k, v in pairs.items()}
    both_unsupported = compare([_synthetic("u", 0, 0, "unsupported")], [_synthetic("u", 0, 0, "unsupported")], rule)
    assert both_unsupported[0].verdict == "agree"
    lost = compare([_synthetic("x", 10.0, 0.01)], [_synthetic("x", 0, 0, "failed")], rule)
    assert lost[0].verdict == "disagree" and "failed here" in lost[0].reason


def _synthetic(kid: str, median: float, rel_iqr: float, status: str = "ok") -> SimpleNamespace:
    """What compare() reads of a result: id, status, reason and the kernel's time statistics."""
    from deepbench.kernels.results import Status

    if status != "ok":
        return SimpleNamespace(id=kid, status=Status(status), reason="why", time_us=None, flags=())
    half = median * rel_iqr / 2
    stats = TimeStats(
        median=median, min=median - half, max=median + half, mean=median, p25=median - half, p75=median + half, n=20
    )
    assert abs(stats.rel_iqr - rel_iqr) < 1e-9
    return SimpleNamespace(id=kid, status=Status.OK, reason="", time_us=stats, flags=())


def test_verify_refuses_a_bundle_that_fails_its_check(copy: Path, tmp_path: Path) -> None:
    (copy / "extra.txt").write_text("x\n")
    proc = run_cli("deepbench", "verify", str(copy), "--local", "--out", str(tmp_path / "v"))
    assert proc.returncode == 1 and "passes deepbench check" in proc.stderr
    assert not (tmp_path / "v").exists()


def test_verify_of_a_local_submission_needs_local(bundle: Path, tmp_path: Path) -> None:
    proc = run_cli("deepbench", "verify", str(bundle), "--out", str(tmp_path / "v"))
    assert proc.returncode == 2 and "verify it with --local" in proc.stderr


@pytest.mark.parametrize("kernel_time", [True, False])
def test_reproduce_command_keeps_the_gpu_timing_flags(kernel_time: bool) -> None:
    """--cold, --verify-timing, --no-kernel-time and --engine-race change what a GPU time means: a re-run must
    repeat them."""
    import shlex

    from deepbench.kernels.backends.cudnn.declaration import CUDNN
    from deepbench.kernels.results import Settings
    from deepbench.runner.launch.running.request import parse_request
    from deepbench.runner.platforms import get_platform
    from deepbench.runner.submission.bundle import reproduce_command

    settings = Settings(device="cuda", cold=True, verify_timing=True, kernel_time=kernel_time, warm_up_s=30.0)
    plan = Plan(
        run_id="r",
        suite="train",
        platform="nvidia",
        backend=get_platform("nvidia").backend,
        settings=settings,
        items=(),
    )
    command = reproduce_command(plan, local=True, image_digest=None)
    again = parse_request(shlex.split(command)[1:]).settings(get_platform("nvidia"))
    assert (again.cold, again.verify_timing, again.kernel_time) == (True, True, kernel_time)
    inline = plan.model_copy(
        update={"settings": settings.model_copy(update={"backend_options": {"cudnn": {"engine_race": "inline"}}})}
    )
    command = reproduce_command(inline, local=True, image_digest=None)
    again = parse_request(shlex.split(command)[1:]).settings(get_platform("nvidia"))
    assert CUDNN.options_of(again).engine_race == "inline"
    assert parse_request(["--local", "--platform", "nvidia"]).settings().kernel_time


def test_a_different_image_is_reported_not_run() -> None:
    """verify compares the image the submission ran in with its own by id and says when they
    differ (it never runs the submission's)."""
    from datetime import datetime, timezone

    from deepbench.runner.submission.layout import ImageSource, SubmissionIndex
    from deepbench.runner.submission.verify import image_difference

    theirs, mine = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    index = SubmissionIndex(
        created_at=datetime.now(timezone.utc),
        tool_version="x",
        run_id="r",
        suite="smoke",
        platform="cpu",
        backend="torch",
        local=False,
        image_digest=theirs,
        image=ImageSource(id=theirs),
        reproduce="",
        verify="",
        files={},
    )
    text = image_difference(index, {"id": mine})
    assert text is not None and theirs[:19] in text and mine[:19] in text and "not run" in text
    assert image_difference(index, {"id": theirs}) is None
