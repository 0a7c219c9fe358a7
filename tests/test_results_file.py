"""results.jsonl written whole or not at all, and read so that damage is named and set aside
(kernels/results_file.py): real write failures (a file-size limit that cuts a write short, a full
tmpfs as root), fragments, damaged lines, and atomic documents."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deepbench.kernels.results import ResultsFileError
from deepbench.kernels.results_file import REJECTED_FILE, append_result, read_results, scan, set_aside, write_atomic


def result(reason: str = "not on this machine"):
    """A small valid record (an unsupported kernel)."""
    from deepbench.kernels.catalog import by_id
    from deepbench.kernels.precision import PRECISIONS, Precision
    from deepbench.kernels.results import KernelResult, Status, utcnow

    now = utcnow()
    return KernelResult(
        id="gemm/train/020/fp32",
        kernel=by_id()["gemm/train/020"],
        precision=PRECISIONS[Precision.FP32],
        backend="torch",
        status=Status.UNSUPPORTED,
        reason=reason,
        started_at=now,
        ended_at=now,
    )


def record_bytes() -> bytes:
    return result().model_dump_json().encode() + b"\n"


# A write cut short by the kernel: RLIMIT_FSIZE lets the first write through up to the limit (a
# partial line on disk), and the next fails with EFBIG. The child ignores SIGXFSZ to see the error.
CUT_SHORT = r"""
import resource, signal, sys
from pathlib import Path
from deepbench.kernels.results import KernelResult
from deepbench.kernels.results_file import WriteFailed, append_result
path = Path(sys.argv[1])
record = KernelResult.model_validate_json(Path(sys.argv[2]).read_text())
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = path.stat().st_size + 100
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    append_result(path, record)
except WriteFailed as exc:
    print("failed:", exc)
"""


def test_a_write_cut_short_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(record_bytes())
    before = path.read_bytes()
    record = tmp_path / "record.json"
    record.write_text(result("x" * 3000).model_dump_json())  # longer than the 100 bytes the limit lets through
    proc = subprocess.run([sys.executable, "-c", CUT_SHORT, str(path), str(record)], capture_output=True, text=True)
    assert "failed: could not write results.jsonl (File too large)" in proc.stdout, proc.stdout + proc.stderr
    assert path.read_bytes() == before  # cut back: no partial line
    append_result(path, result())
    assert len(read_results(path)) == 2


def test_full_disk_append_fails_whole(tmp_path: Path, root_or_skip: None) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], check=True)
    try:
        path = disk / "results.jsonl"
        page = record_bytes()
        path.write_bytes(page + b" " * (4096 - len(page) % 4096 - 1) + b"\n")  # ends at a page boundary
        before = path.read_bytes()
        with (disk / "filler").open("wb", buffering=0) as f:
            try:
                while f.write(b"\0" * 4096):
                    pass
            except OSError:
                pass
        from deepbench.kernels.results_file import WriteFailed

        with pytest.raises(WriteFailed) as caught:
            append_result(path, result())
        assert caught.value.no_space and f"it needed {len(record_bytes()):,} bytes" in str(caught.value)
        assert "0 are free" in str(caught.value)
        assert path.read_bytes() == before
        with pytest.raises(WriteFailed):  # a document: the old one stays, no temporary file is left
            write_atomic(disk / "run.json", "{}" * 5000)
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "results.jsonl"]
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_fragment_is_set_aside_before_the_next_record(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    whole = record_bytes()
    path.write_bytes(whole + whole[:200])
    assert len(read_results(path)) == 1  # a partial last line is left out when reading
    append_result(path, result())
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 2 and lines[0] == whole and lines[1].endswith(b"}\n")
    side = json.loads((tmp_path / REJECTED_FILE).read_text())
    assert side["text"].encode() == whole[:200] and side["line"] is None


def test_a_complete_record_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(record_bytes().rstrip(b"\n"))
    append_result(path, result())
    assert len(read_results(path)) == 2 and not (tmp_path / REJECTED_FILE).exists()


def test_damaged_lines_are_named_and_salvaged(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    whole = record_bytes()
    path.write_bytes(whole + b"garbage\n" + whole[:50] + whole + whole[:10])
    found = scan(path)
    assert [d.line for d in found.damaged] == [2, 3] and found.salvaged == [3]
    assert found.fragment is not None and found.fragment.raw == whole[:10]
    assert len(found.results) == 2
    with pytest.raises(ResultsFileError, match="line 2 is damaged"):
        read_results(path)
    set_aside(path, found.damaged)
    assert len((tmp_path / REJECTED_FILE).read_text().splitlines()) == 2
