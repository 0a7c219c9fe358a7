"""Issue 57's cases found by trying the tool as a careless user: each was a traceback, a false message or
files where they should not be on the code before, and is one line (exit 2) or an honest stop now.

- 8:  `--out /`, the home folder and the folders above it, a system folder, a folder of other things:
      refused before anything is written; a new, empty or run-only folder is taken;
- 9:  arguments that are not UTF-8 (`--out $'runs/\\xff\\xfebad'`, `submit --notes $'\\xff\\xfe'`, a
      vendor file's `\\udcff`): one line, nothing left behind (no folder, no lock, no partial bundle);
- 10: a stop (SIGTERM, SIGINT) before the first result, the run in its own session (setsid): 143/130,
      "0 of N kernels done; continue with --resume", and the resume completes; a stop while the folder
      is being made leaves no folder;
- 11: no Docker daemon: a container run leaves no folder, a container run resumed is left untouched;
- submit of a live run says to wait for it or stop it and resume (a live folder refuses --resume)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from deepbench.kernels.results_file import scan
from deepbench.runner.cli import main, run_main
from deepbench.runner.launch.running import run_folder
from deepbench.runner.launch.running.signals import Stopped

from .conftest import local_run, run_cli

EXIT_USAGE = 2
RUN_ARGS = ("--suite", "smoke", "--ops", "gemm", "--fast", "--threads", "1", "--quiet")
PLANNED = 3  # the smoke suite's GEMMs
HANG_FIRST = {"DEEPBENCH_FAULT": "hang:gemm/"}  # the first kernel never ends: no result
HANG_SECOND = {"DEEPBENCH_FAULT": "hang:gemm/train/020"}  # one result, then the second kernel hangs
WAIT_S = 180
ABSENT_DAEMON = "unix://{}/absent.sock"


def one_line(rc: int, stderr: str, *words: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert rc == EXIT_USAGE, (rc, stderr)
    assert len(lines) == 1 and "error:" in lines[0] and "Traceback" not in stderr, stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return local_run(tmp_path_factory.mktemp("done") / "run", *RUN_ARGS)


@pytest.fixture
def never_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run folder that would be made at all fails the test (before it is made: nothing lands in `/`
    or in a system folder even where the check under test were missing)."""

    def made(path: Path, option: str = "--out") -> Path:
        raise AssertionError(f"a run folder was about to be made at {path}")

    monkeypatch.setattr(run_folder, "writable_folder", made)


# ----- 8: where --out may be -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("out", "says"),
    [("/", "is the root folder"), ("/usr/local/deepbench-results", "is a system folder"), ("/var", "system folder")],
)
def test_out_in_a_system_place_is_one_line_and_nothing_is_written(
    never_writes: None, capsys: pytest.CaptureFixture[str], out: str, says: str
) -> None:
    before = set(os.listdir("/"))
    assert run_main(["--local", *RUN_ARGS, "--out", out]) == EXIT_USAGE
    one_line(EXIT_USAGE, capsys.readouterr().err, f"--out {out}", says, "nothing was written")
    assert set(os.listdir("/")) == before and not Path("/usr/local/deepbench-results").exists()


def test_out_at_home_or_above_is_refused(
    never_writes: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home" / "me"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert run_main(["--local", *RUN_ARGS, "--out", str(home)]) == EXIT_USAGE
    one_line(EXIT_USAGE, capsys.readouterr().err, "is your home folder")
    assert run_main(["--local", *RUN_ARGS, "--out", str(home.parent)]) == EXIT_USAGE
    one_line(EXIT_USAGE, capsys.readouterr().err, "holds your home folder")
    assert list(home.iterdir()) == []


def test_out_into_a_folder_of_other_things_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("mine\n")
    (mine / ".git").mkdir()
    proc = run_cli("deepbench-run", "--local", *RUN_ARGS, "--out", str(mine), timeout=WAIT_S)
    one_line(proc.returncode, proc.stderr, "holds files that are not a deepbench run's", ".git, thesis.tex")
    assert sorted(p.name for p in mine.iterdir()) == [".git", "thesis.tex"]
    proc = run_cli("deepbench", "verify", str(tmp_path / "no-bundle"), "--local", "--out", str(mine))
    one_line(proc.returncode, proc.stderr, "holds files that are not a deepbench run's")


def test_out_that_is_new_empty_or_a_runs_leftovers_is_taken(tmp_path: Path) -> None:
    """What an earlier version left (a folder with only its lock) and an empty folder are a run's to use."""
    empty, leftover = tmp_path / "empty", tmp_path / "leftover"
    empty.mkdir()
    leftover.mkdir()
    (leftover / ".lock").write_text("{}\n")
    (leftover / ".plan.json.123.tmp").write_text("")  # an atomic write cut short by kill -9
    for out in (empty, leftover):
        run_folder.check_place(out)  # raises where refused
    local_run(leftover, "--suite", "smoke", "--ops", "gemm", "--limit", "1", "--fast", "--threads", "1", "--quiet")
    assert len(scan(leftover / "results.jsonl").results) == 1


# ----- 9: arguments that are not text ----------------------------------------------------------
def test_an_out_path_that_is_not_utf8_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    proc = subprocess.run(
        [b"deepbench-run", b"--local", *(a.encode() for a in RUN_ARGS), b"--out", b"runs/\xff\xfebad"],
        capture_output=True,
        cwd=tmp_path,
        timeout=WAIT_S,
    )
    one_line(proc.returncode, proc.stderr.decode(), "runs/\\xff\\xfebad", "not UTF-8")
    assert list(tmp_path.iterdir()) == []


def test_notes_that_are_not_utf8_are_one_line_and_leave_no_partial_bundle(finished: Path, tmp_path: Path) -> None:
    out = tmp_path / "B"
    proc = subprocess.run(
        [b"deepbench", b"submit", bytes(finished), b"--out", bytes(out), b"--notes", b"\xff\xfe"],
        capture_output=True,
        timeout=WAIT_S,
    )
    one_line(proc.returncode, proc.stderr.decode(), "\\xff\\xfe", "not UTF-8")
    vendor = tmp_path / "vendor.json"
    vendor.write_text('{"notes": "BIOS \\udcff"}')
    proc = run_cli("deepbench", "submit", str(finished), "--out", str(out), "--vendor-file", str(vendor))
    one_line(proc.returncode, proc.stderr, "vendor field notes", "not UTF-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vendor.json"]  # no B, no .B.XXXX.partial


def test_a_bundle_stopped_while_written_leaves_no_partial_copy(
    finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deepbench.runner.submission import bundle

    def stopped(*args: object) -> None:
        raise Stopped(signal.SIGTERM)

    monkeypatch.setattr(bundle, "write_manifest", stopped)
    assert main(["submit", str(finished), "--out", str(tmp_path / "B")]) == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


# ----- 10: a stop before the first result ------------------------------------------------------
def start_apart(out: Path, env: dict[str, str], *extra: str) -> subprocess.Popen:
    """deepbench-run in a session of its own (as setsid starts it), with the stop signals a terminal gives."""
    return subprocess.Popen(
        ["deepbench-run", "--local", *RUN_ARGS, "--out", str(out), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
        start_new_session=True,
        preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGINT, signal.SIGHUP)],
    )


def wait_for_harness(out: Path, proc: subprocess.Popen, results: int = 0) -> None:
    """Until a harness holds the folder and `results` results are in."""
    from deepbench.kernels.folder_lock import HARNESS_LOCK, probe

    end = time.monotonic() + WAIT_S
    while probe(out, HARNESS_LOCK) is None or len(scan(out / "results.jsonl").results) < results:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the harness did not start in time"
        time.sleep(0.2)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_before_the_first_result_is_honest_and_resumable(tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "run"
    proc = start_apart(out, HANG_FIRST)
    wait_for_harness(out, proc)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 128 + sig, stdout + stderr
    assert "error" not in stderr and "Traceback" not in stderr, stderr
    assert f"interrupted: 0 of {PLANNED} kernels done; continue with: deepbench-run --resume {out}" in stdout, stdout
    record = json.loads((out / "run.json").read_text())
    assert record["state"] == "interrupted" and not (out / "results.jsonl").exists()
    proc = run_cli("deepbench-run", "--resume", str(out), "--quiet", timeout=WAIT_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(scan(out / "results.jsonl").results) == PLANNED


def test_a_stop_while_the_folder_is_made_leaves_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def stopped(*args: object) -> None:
        raise Stopped(signal.SIGTERM)

    monkeypatch.setattr(run_folder, "write_record", stopped)  # after the lock and plan.json, before run.json
    out = tmp_path / "new" / "run"
    assert run_main(["--local", *RUN_ARGS, "--out", str(out)]) == 128 + signal.SIGTERM
    assert "no results folder was left" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


# ----- 11: no Docker daemon ----------------------------------------------------------------------
def test_without_a_daemon_a_container_run_leaves_no_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    env = {"DOCKER_HOST": ABSENT_DAEMON.format(tmp_path)}
    proc = run_cli("deepbench-run", "--platform", "intel", "--suite", "smoke", "--out", str(out), env=env)
    one_line(proc.returncode, proc.stderr, "no Docker daemon answers", "--local")
    assert not out.exists()


def test_without_a_daemon_a_container_run_resumed_is_left_untouched(finished: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    record = json.loads((out / "run.json").read_text())
    record["provenance"]["local"] = False  # as a container run records itself
    (out / "run.json").write_text(json.dumps(record, indent=1) + "\n")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    env = {"DOCKER_HOST": ABSENT_DAEMON.format(tmp_path)}
    proc = run_cli("deepbench-run", "--resume", str(out), env=env)
    one_line(proc.returncode, proc.stderr, "no Docker daemon answers")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


# ----- submit of a live run ----------------------------------------------------------------------
def test_submit_of_a_live_run_says_to_wait_or_stop_and_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = start_apart(out, HANG_SECOND)
    try:
        wait_for_harness(out, proc, results=1)
        said = run_cli("deepbench", "submit", str(out), "--out", str(tmp_path / "B"))
        line = one_line(said.returncode, said.stderr, "still going", f"PID {proc.pid}", "wait for it to end")
        assert f"kill {proc.pid}" in line and f"deepbench-run --resume {out}" in line
        assert not (tmp_path / "B").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=WAIT_S)
    said = run_cli("deepbench", "submit", str(out), "--out", str(tmp_path / "B"))
    one_line(said.returncode, said.stderr, "is interrupted: finish it first", "--resume")
