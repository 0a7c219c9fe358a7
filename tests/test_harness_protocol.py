"""The harness protocol (kernels/harness/protocol.py): the events and exit statuses the harness
and the host share, and the capabilities a backend declares instead of being probed for them."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from deepbench.kernels.backends.collectives.common import CollectiveBackend
from deepbench.kernels.backends.contract.base import Backend, Prepared, TimedPart
from deepbench.kernels.harness.protocol import EVENT_KEY, ErrorKind, Event, ExitCode, event_line, parse_event
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Check, Settings
from deepbench.runner.errors import UserError
from deepbench.runner.launch.running.supervise import Outcome

ROOT = Path(__file__).resolve().parents[1]
# Harnesses in published images print these names and exit with these numbers: they never change.
BACKEND_NAMES = {"backend", "_backend", "dense", "_current"}  # what code calls a Backend it holds
PUBLISHED_EVENTS = {"facts", "start", "done", "error", "restart", "end"}
PUBLISHED_STATUSES = {
    "OK": 0,
    "KERNEL_FAILURES": 1,
    "USAGE": 2,
    "BACKEND_UNAVAILABLE": 3,
    "WRITE_FAILED": 74,
    "LOCKED": 75,
    "INTERRUPTED": 130,
}


def test_event_names_and_exit_statuses_are_those_published() -> None:
    assert {e.value for e in Event} == PUBLISHED_EVENTS
    assert {c.name: int(c) for c in ExitCode} == PUBLISHED_STATUSES
    assert {k.value for k in ErrorKind} == {"locked", "write"}


def test_an_event_line_is_what_the_harness_always_printed() -> None:
    """Byte for byte the line json.dumps({"event": name, ...}) wrote before the names were typed."""
    fields = {"id": "gemm/train/000/fp32", "index": 3, "total": 9}
    assert event_line(Event.START, **fields) == json.dumps({"event": "start", **fields})
    assert (
        event_line(Event.ERROR, kind=ErrorKind.WRITE.value, message="m")
        == '{"event": "error", "kind": "write", "message": "m"}'
    )


def test_parse_event_reads_what_event_line_writes() -> None:
    event = parse_event(event_line(Event.DONE, id="x", status="ok", median_us=1.5, reason="") + "\n")
    assert event is not None and event[EVENT_KEY] is Event.DONE and event["median_us"] == 1.5


@pytest.mark.parametrize(
    "line",
    [
        "",
        "loading cuBLAS ...",
        "{not json",
        "[1, 2]",
        '{"id": "x"}',
        '{"event": "from-a-newer-harness"}',
        '{"event": null}',
    ],
)
def test_parse_event_skips_what_is_not_an_event(line: str) -> None:
    assert parse_event(line) is None


def test_exit_codes_are_plain_integers_where_they_leave_the_process() -> None:
    assert UserError("x").exit_code == 2
    assert Outcome("failed").exit_code == ExitCode.KERNEL_FAILURES == 1
    assert f"{ExitCode.WRITE_FAILED:d}" == "74"


def _python_files() -> list[Path]:
    return sorted(p for top in ("kernels", "runner") for p in (ROOT / top).rglob("*.py"))


def test_exit_statuses_are_defined_only_in_the_protocol() -> None:
    """No module but protocol.py names a harness's status (2, 3, 74, 75, 130) in an EXIT_ constant."""
    shared = {int(c) for c in ExitCode} - {ExitCode.OK, ExitCode.KERNEL_FAILURES}
    found = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value in shared:
                names = [t.id for t in node.targets if isinstance(t, ast.Name) and t.id.startswith("EXIT_")]
                found += [f"{path.relative_to(ROOT)}: {n}" for n in names]
    assert not found


def test_the_harness_emits_only_typed_events() -> None:
    """Every emit(...) in the harness names an Event member, never a bare string."""
    tree = ast.parse((ROOT / "kernels/harness/__main__.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "emit"]
    assert len(calls) >= len(Event)
    for call in calls:
        first = call.args[0]
        assert isinstance(first, ast.Attribute) and getattr(first.value, "id", "") == "Event", ast.unparse(call)


def test_nothing_probes_a_backend_for_what_it_can_do() -> None:
    """Capabilities are declared on Backend (ranked, rank, item_barrier, broken), not probed."""
    probes = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", "") in ("hasattr", "getattr")
                and node.args
                and ast.unparse(node.args[0]).split(".")[-1] in BACKEND_NAMES
            ):
                probes.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not probes, probes


class _OneProcess(Backend):
    name = "one-process"

    def prepare(self, kernel, precision):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def measure(self, fn, rule, part):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def test_a_backend_of_one_process_declares_the_defaults() -> None:
    backend = _OneProcess(Settings())
    assert backend.ranked is False and backend.rank == 0 and backend.broken == ""
    assert backend.item_barrier() is None


def test_collective_backends_declare_that_they_are_ranked() -> None:
    assert CollectiveBackend.ranked is True and Backend.ranked is False


def test_prepared_parts_carry_their_precision() -> None:
    """The precision a GPU timer rates a part against travels with the part, not in the backend."""

    def part(direction: str) -> TimedPart:
        return TimedPart(direction, lambda: None, lambda: Check(passed=True, method="none", tolerance=0.0), 1.0, 1.0)

    prepared = Prepared(parts=[part("fwd"), part("bwd")]).in_precision(Precision.BF16)
    assert [p.precision for p in prepared.parts] == [Precision.BF16, Precision.BF16]
    assert part("fwd").precision is Precision.FP32


class _RankGoneAtTheBarrier(_OneProcess):
    """A rank of several whose group breaks at a kernel's barrier, before the kernel runs."""

    def item_barrier(self) -> None:
        raise RuntimeError("no answer within 5 s from rank 2 on dbn2, rank 3 on dbn2 (dead, stuck or cut off)")


def test_a_rank_gone_at_a_kernels_barrier_fails_that_kernel_and_asks_for_a_restart(tmp_path, monkeypatch, capsys):
    """The barrier is the kernel's: the ranks that did not answer are that kernel's recorded reason (a
    CI run saw rank 0 die with a traceback there, and the host record only a per-kernel timeout)."""
    from deepbench.kernels.catalog import by_id
    from deepbench.kernels.harness import __main__ as harness
    from deepbench.kernels.results import Plan, PlanItem, Status
    from deepbench.kernels.results_file import read_results

    monkeypatch.setattr(harness, "load_backend", lambda name, settings: _RankGoneAtTheBarrier(settings))
    items = tuple(PlanItem(kernel=by_id()[k], precision="fp32") for k in ("gemm/train/000", "gemm/train/001"))
    plan = Plan(run_id="r", suite="train", platform="cpu", backend="one-process", settings=Settings(), items=items)
    assert harness._run(plan, tmp_path, None) == ExitCode.INTERRUPTED
    (only,) = read_results(tmp_path / "results.jsonl")
    assert only.id == "gemm/train/000/fp32" and only.status is Status.FAILED
    assert "rank 2 on dbn2, rank 3 on dbn2" in only.reason and "traceback" in only.info
    events = [parse_event(line) for line in capsys.readouterr().out.splitlines()]
    assert [e[EVENT_KEY] for e in events if e] == ["facts", "start", "done", "restart", "end"]
