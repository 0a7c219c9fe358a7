"""The results folder under real faults (issue 21, cases 1-6): a partial or damaged results file,
a full disk (a small tmpfs, as root), SIGTERM, SIGHUP and SIGKILL sent to a running
deepbench-run, two writers on one folder, resumes that must not trust the folder, and input
checked at the door. Each fault followed by --resume must end in a folder that `deepbench
submit` and `deepbench check` accept, with no result lost and none duplicated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from deepbench.kernels.backends import preferred_backend
from deepbench.kernels.results import KernelResult, RunRecord, Status
from deepbench.kernels.results_file import REJECTED_FILE, read_results, scan

from .conftest import PYTHON, run_cli

# Five kernels (three GEMMs, two convolutions), short measurements, one thread.
CPU_DEFAULT = preferred_backend("cpu")  # what a run with no --backend runs
RUN = ("deepbench-run", "--local", "--suite", "smoke", "--ops", "gemm,conv", "--fast", "--threads", "1", "--quiet")
PLANNED = 5
HANG_FOURTH = {"DEEPBENCH_FAULT": "hang:conv/inference_server/006"}  # three results, then it hangs
WAIT_S = 180


def default_signals() -> None:
    """In the child: stop signals as a terminal gives them (a suite run under nohup or in the
    background would pass SIGHUP or SIGINT on ignored, and the run would rightly keep ignoring them)."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def start(out: Path, *extra: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [*RUN, "--out", str(out), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        preexec_fn=default_signals,
    )


def wait_for(out: Path, n: int, proc: subprocess.Popen) -> None:
    end = time.monotonic() + WAIT_S
    while time.monotonic() < end:
        if len(scan(out / "results.jsonl").results) >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} results in {WAIT_S} s")


def lock_holder(out: Path, name: str) -> int:
    return json.loads((out / name).read_text())["pid"]


def one_line_error(proc: subprocess.CompletedProcess | tuple, code: int, *words: str) -> str:
    rc, stderr = (proc.returncode, proc.stderr) if isinstance(proc, subprocess.CompletedProcess) else proc
    lines = [
        line
        for line in stderr.splitlines()
        if line.strip() and "UserWarning" not in line and "to_sparse_csr" not in line
    ]
    assert rc == code, (rc, stderr)
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1 and "error:" in lines[0], stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def resume(out: Path) -> subprocess.CompletedProcess:
    proc = run_cli("deepbench-run", "--resume", str(out), "--quiet", timeout=WAIT_S)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    return proc


def submitted_and_checked(out: Path, tmp: Path, kept: list[KernelResult], planned: int = PLANNED) -> None:
    """The folder is complete: every result kept as it was, one per planned kernel, and a bundle
    made of it passes deepbench check."""
    final = read_results(out / "results.jsonl")
    assert len(final) == planned and len({r.id for r in final}) == planned
    by_id = {r.id: r for r in final}
    for r in kept:
        assert by_id[r.id].model_dump() == r.model_dump(), r.id
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    assert record.state == "complete" and sum(record.counts.values()) == planned
    bundle = tmp / "bundle"
    proc = run_cli(
        "deepbench",
        "submit",
        str(out),
        "--out",
        str(bundle),
        "--submitter",
        "CI",
        "--system-name",
        "CI VM",
        env={"COLUMNS": "300"},
    )
    assert proc.returncode == 0 and "check passed" in proc.stdout, proc.stdout + proc.stderr
    proc = run_cli("deepbench", "check", str(bundle), env={"COLUMNS": "300"})
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("finished") / "run"
    proc = run_cli(*RUN, "--out", str(out), timeout=WAIT_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture
def run_copy(finished: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    subprocess.run(["cp", "-a", str(finished), str(out)], check=True)
    return out


# ----- case 1: a partial last line, then --resume -----------------------------------------------
def test_partial_last_line_is_set_aside_and_measured_again(run_copy: Path, tmp_path: Path) -> None:
    path = run_copy / "results.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    cut = lines[-1][: len(lines[-1]) // 2]  # what a crash (or a full disk) in the middle of a write leaves
    path.write_bytes(b"".join(lines[:-1]) + cut)
    kept = read_results(path)
    assert len(kept) == PLANNED - 1
    proc = resume(run_copy)
    assert "partial record" in proc.stdout and REJECTED_FILE in proc.stdout
    side = [json.loads(x) for x in (run_copy / REJECTED_FILE).read_text().splitlines()]
    assert side[0]["text"].encode() == cut and side[0]["line"] is None
    assert path.read_bytes().endswith(b"\n")
    report = run_cli("deepbench", "report", str(run_copy))
    assert report.returncode == 0, report.stderr
    submitted_and_checked(run_copy, tmp_path, kept)


def test_fragment_glued_to_a_record_by_an_older_tool_is_repaired(run_copy: Path, tmp_path: Path) -> None:
    """What resume did before: the next record appended onto the fragment. The record behind it is
    kept, the fragment set aside, and report reads the folder again."""
    path = run_copy / "results.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    glued = lines[-2][:100] + lines[-1]
    path.write_bytes(b"".join(lines[:-2]) + glued)
    assert run_cli("deepbench", "report", str(run_copy)).returncode == 2  # named, not a traceback
    proc = resume(run_copy)
    assert f"line {len(lines) - 1} began with a partial record" in proc.stdout
    final = read_results(run_copy / "results.jsonl")
    assert sorted(r.id for r in final) == sorted(KernelResult.model_validate_json(x).id for x in lines)
    salvaged = KernelResult.model_validate_json(lines[-1])
    assert next(r for r in final if r.id == salvaged.id).model_dump() == salvaged.model_dump()


def test_damaged_line_in_the_middle_is_quarantined_with_its_number(run_copy: Path, tmp_path: Path) -> None:
    path = run_copy / "results.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b'{"schema_version": "deepbench.result/1", "id": "gemm/train/020/fp32", "status": "o\xff\n'
    path.write_bytes(b"".join(lines))
    report = run_cli("deepbench", "report", str(run_copy))
    one_line_error(report, 2, "line 2 is damaged")
    proc = resume(run_copy)
    assert "line 2 is damaged" in proc.stdout and "measured again" in proc.stdout
    final = {r.id: r for r in read_results(run_copy / "results.jsonl")}
    assert len(final) == PLANNED and "gemm/train/020/fp32" in final
    assert "deepbench.result/1" in json.loads((run_copy / REJECTED_FILE).read_text())["text"]


# ----- cases 3 and 4: signals, SIGKILL and a second writer, each followed by --resume ----------
def test_stops_and_second_writers_then_resume_end_in_a_checked_bundle(tmp_path: Path) -> None:
    """One folder through every stop: SIGTERM (exit 143, state interrupted), a resume killed with
    SIGKILL while a second run, a second resume and a second harness are refused naming the
    writer, a resume stopped by SIGHUP (129), and a last resume: then submit and check accept it,
    with every result kept as it was and none twice. Each stop is a segment of the run."""
    out = tmp_path / "run"
    first = start(out, env=HANG_FOURTH)
    wait_for(out, 3, first)
    first.send_signal(signal.SIGTERM)
    stdout, stderr = first.communicate(timeout=WAIT_S)
    assert first.returncode == 128 + signal.SIGTERM, stdout + stderr
    assert "Traceback" not in stderr and "--resume" in stdout
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    assert record.state == "interrupted" and record.segments[-1].state == "interrupted"
    kept = read_results(out / "results.jsonl")
    assert len(kept) == 3

    resumed = resume_in_background(out)
    wait_for_harness(out)
    pid = lock_holder(out, ".lock")
    assert pid == resumed.pid
    one_line_error(run_cli(*RUN, "--out", str(out)), 2, f"PID {pid}", "one run writes a results folder at a time")
    one_line_error(run_cli("deepbench-run", "--resume", str(out)), 2, f"PID {pid}")
    harness = subprocess.run(
        [PYTHON, "-m", "deepbench.kernels.harness", str(out / "plan.json"), str(out)],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert harness.returncode == 75, harness.stdout + harness.stderr  # a second harness stops at once
    assert f"PID {lock_holder(out, '.harness.lock')}" in harness.stdout
    resumed.kill()  # kill -9: the harness is told its runner died, and stops after writing its record
    resumed.communicate(timeout=WAIT_S)
    wait_for_harness(out, held=False)

    resumed = resume_in_background(out)
    wait_for_harness(out)
    resumed.send_signal(signal.SIGHUP)
    stdout, stderr = resumed.communicate(timeout=WAIT_S)
    assert resumed.returncode == 128 + signal.SIGHUP, stdout + stderr
    assert len(scan(out / "results.jsonl").records) == 3  # none of the refused writers wrote

    resume(out)
    record = RunRecord.model_validate_json((out / "run.json").read_text())
    states = [s.state for s in record.segments]
    assert states[0] == states[2] == "interrupted" and states[3] == "complete", states
    assert states[1] in ("interrupted", "killed"), states  # the harness's record, or none if killed starting
    assert all(s.ended_at is not None for s in record.segments)
    submitted_and_checked(out, tmp_path, kept)


def resume_in_background(out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        ["deepbench-run", "--resume", str(out), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **HANG_FOURTH},
        preexec_fn=default_signals,
    )


def wait_for_harness(out: Path, held: bool = True) -> None:
    """Until a harness holds the folder (or, held=False, until none does)."""
    from deepbench.kernels.folder_lock import HARNESS_LOCK, probe

    end = time.monotonic() + WAIT_S
    while (probe(out, HARNESS_LOCK) is None) == held:
        assert time.monotonic() < end, "the harness did not start (or stop) in time"
        time.sleep(0.2)


# ----- case 2: a full disk ----------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path, root_or_skip: None):
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as f:
        try:
            while f.write(b"\0" * 4096):
                pass
        except OSError:  # no space left: the disk is full
            pass
    return filler


def test_full_disk_stops_with_what_it_needs_and_resumes(small_disk: Path, tmp_path: Path) -> None:
    """The disk fills while the harness measures: its next result cannot be written (or, when the
    last results fit in the file's last page, its run record cannot)."""
    out = small_disk / "run"
    proc = start(out, "--ops", "gemm,conv,rnn,sparse_gemm")  # 9 kernels: most are left when the disk fills
    wait_for(out, 1, proc)
    harness = lock_holder(out, ".harness.lock")
    os.kill(harness, signal.SIGSTOP)  # hold the harness while the disk fills
    filler = fill(small_disk)
    os.kill(harness, signal.SIGCONT)
    _stdout, stderr = proc.communicate(timeout=WAIT_S)
    line = one_line_error((proc.returncode, stderr), 74, "no space left", "are free", "--resume")
    assert "results.jsonl" not in line or "left need about" in line, line
    raw = (out / "results.jsonl").read_bytes()
    assert raw.endswith(b"\n") and scan(out / "results.jsonl").clean  # cut back to its last whole line
    kept = read_results(out / "results.jsonl")
    assert len(kept) >= 1
    filler.unlink()
    resume(out)
    submitted_and_checked(out, tmp_path, kept, planned=9)


# ----- case 5: resume verifies what it continues -----------------------------------------------
def test_resume_refuses_duplicates(run_copy: Path) -> None:
    path = run_copy / "results.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines, lines[0]]))
    one_line_error(
        run_cli("deepbench-run", "--resume", str(run_copy)),
        2,
        "holds 2 results for",
        f"lines 1, {len(lines) + 1}",
        "two runs wrote",
    )


def test_resume_refuses_results_the_plan_lacks(run_copy: Path) -> None:
    plan = json.loads((run_copy / "plan.json").read_text())
    plan["items"] = plan["items"][:-1]  # the plan edited (and run.json with it, as a careful editor would)
    text = json.dumps(plan, indent=1) + "\n"
    (run_copy / "plan.json").write_text(text)
    record = json.loads((run_copy / "run.json").read_text())
    record["plan_sha256"] = None
    record["provenance"].pop("suite_sha256")
    (run_copy / "run.json").write_text(json.dumps(record))
    one_line_error(run_cli("deepbench-run", "--resume", str(run_copy)), 2, "which plan.json does not list")


def test_resume_refuses_a_changed_plan(run_copy: Path) -> None:
    plan = json.loads((run_copy / "plan.json").read_text())
    plan["suite"] = "train"
    (run_copy / "plan.json").write_text(json.dumps(plan, indent=1) + "\n")
    one_line_error(run_cli("deepbench-run", "--resume", str(run_copy)), 2, "has changed since the run started")


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--suite", "train"], "--suite 'train' differs from the run's 'smoke'"),
        (["--rigorous"], "--fast/--rigorous 'rigorous' differs from the run's 'fast'"),
        (["--seed", "5"], "--seed 5 differs from the run's 0"),
        (["--image", "x"], "--image applies to container runs"),
        (["--ops", "rnn"], "--ops ('rnn',) differs"),
    ],
)
def test_options_that_contradict_the_run_are_refused(run_copy: Path, extra: list[str], words: str) -> None:
    one_line_error(run_cli("deepbench-run", "--resume", str(run_copy), *extra), 2, words)


def test_options_that_agree_with_the_run_are_accepted(run_copy: Path) -> None:
    proc = run_cli(
        "deepbench-run", "--resume", str(run_copy), "--local", "--suite", "smoke", "--fast", "--threads", "1", "--quiet"
    )
    assert proc.returncode == 0, proc.stderr
    assert f"(local, backend {CPU_DEFAULT}): 5 kernels, 5 already done" in proc.stdout


def test_run_mode_is_in_the_record_and_old_markers_still_read(run_copy: Path) -> None:
    """A folder says in run.json how it ran: without any marker file it resumes locally (never a
    Docker build); an older folder with only the .local marker and no run.json does too."""
    assert not (run_copy / ".local").exists()
    assert RunRecord.model_validate_json((run_copy / "run.json").read_text()).provenance.local is True
    (run_copy / "results.jsonl").write_bytes(
        b"".join((run_copy / "results.jsonl").read_bytes().splitlines(keepends=True)[:-1])
    )
    proc = resume(run_copy)
    assert f"(local, backend {CPU_DEFAULT})" in proc.stdout
    (run_copy / "run.json").unlink()
    (run_copy / ".local").write_text("1\n")
    proc = resume(run_copy)
    assert f"(local, backend {CPU_DEFAULT})" in proc.stdout
    (run_copy / ".local").unlink()
    (run_copy / "run.json").unlink()
    one_line_error(run_cli("deepbench-run", "--resume", str(run_copy)), 2, "resume with --local")


# ----- case 6: input checked at the door ------------------------------------------------------------
@pytest.mark.parametrize(
    "args, words",
    [
        (["--kernel-timeout", "nan"], "--kernel-timeout: must be a finite number"),
        (["--time-cap", "inf"], "--time-cap: must be a finite number"),
        (["--time-cap", "0"], "--time-cap: must be above 0"),
        (["--target", "-1"], "--target: must be above 0"),
        (["--warm-up", "-5"], "--warm-up: must be at least 0"),
        (["--threads", "100000"], "--threads: must be at most"),
        (["--threads", "0"], "--threads: must be at least 1"),
        (["--seed", str(2**64)], "--seed: must be at most 9223372036854775807"),
        (["--seed", "-1"], "--seed: must be at least 0"),
        (["--precision", ""], "--precision is empty"),
        (["--ops", ""], "--ops is empty"),
        (["--ops", ","], "--ops is empty"),
        (["--time-cap", "700"], "must be shorter than --kernel-timeout"),
    ],
)
def test_run_options_are_checked_at_the_door(tmp_path: Path, args: list[str], words: str) -> None:
    out = tmp_path / "x"
    one_line_error(run_cli("deepbench-run", "--local", "--out", str(out), *args), 2, words)
    assert not (out / "plan.json").exists()


def test_out_that_is_a_file_is_one_line_for_every_command(finished: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x\n")
    one_line_error(run_cli("deepbench-run", "--local", "--out", str(a_file)), 2, "is a file, not a folder")
    one_line_error(
        run_cli("deepbench", "report", str(finished), "--format", "md", "--out", str(a_file / "r.md")),
        2,
        "is a file, not a folder",
    )
    one_line_error(run_cli("deepbench", "submit", str(finished), "--out", str(a_file)), 2, "is a file, not a folder")
    one_line_error(
        run_cli("deepbench", "report", str(finished), "--format", "md", "--out", str(tmp_path)),
        2,
        "is a folder: give a file name",
    )
    bundle = tmp_path / "bundle"
    assert run_cli("deepbench", "submit", str(finished), "--out", str(bundle)).returncode == 0
    one_line_error(
        run_cli("deepbench", "verify", str(bundle), "--local", "--out", str(a_file)), 2, "is a file, not a folder"
    )


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_verify_tolerances_are_checked(tmp_path: Path, value: str) -> None:
    one_line_error(
        run_cli("deepbench", "verify", str(tmp_path), "--local", "--tolerance", value), 2, "--tolerance: must be"
    )


@pytest.fixture
def read_only(tmp_path: Path, root_or_skip: None):
    mount = tmp_path / "ro"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_read_only_out_is_one_line_for_every_command(finished: Path, read_only: Path, tmp_path: Path) -> None:
    """A read-only filesystem (root is not stopped by permissions, so a read-only mount)."""
    words = "read-only filesystem"
    one_line_error(run_cli("deepbench-run", "--local", "--out", str(read_only / "run")), 2, words)
    one_line_error(
        run_cli("deepbench", "report", str(finished), "--format", "md", "--out", str(read_only / "r.md")), 2, words
    )
    one_line_error(run_cli("deepbench", "submit", str(finished), "--out", str(read_only / "b")), 2, words)
    bundle = tmp_path / "bundle"
    assert run_cli("deepbench", "submit", str(finished), "--out", str(bundle)).returncode == 0
    one_line_error(run_cli("deepbench", "verify", str(bundle), "--local", "--out", str(read_only / "v")), 2, words)


def test_no_space_at_the_door(small_disk: Path) -> None:
    fill(small_disk)
    one_line_error(run_cli("deepbench-run", "--local", "--out", str(small_disk / "run")), 2, "no space left")


def test_run_record_counts_each_kernel_once(run_copy: Path) -> None:
    """Duplicated lines are never counted twice in the run record."""
    from deepbench.kernels.harness.record import build_record
    from deepbench.kernels.results import Plan

    path = run_copy / "results.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines + lines[:2]))
    plan = Plan.model_validate_json((run_copy / "plan.json").read_text())
    record = build_record(plan, run_copy, "complete", read_results(path)[0].started_at, {})
    assert sum(record.counts.values()) == PLANNED and record.counts == {Status.OK.value: PLANNED}
