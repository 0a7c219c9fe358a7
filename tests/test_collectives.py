"""Every collective (all-reduce, all-gather, reduce-scatter, broadcast, reduce, all-to-all, send/recv)
over real CPU ranks with gloo (torchrun) and MPI (mpiexec from the MPICH wheel): nccl-tests' sizes and
bus factors, the exact check on every rank, a planted wrong value on one rank failing it; nccl-tests'
output read and set beside a run (`deepbench report --nccl-tests`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deepbench.kernels.backends.collectives import values
from deepbench.kernels.backends.collectives.problems import problem
from deepbench.kernels.collective_kernels import COLLECTIVE_KERNELS, COLLECTIVES_BY_OP
from deepbench.kernels.results import KernelResult, Plan, Status
from deepbench.kernels.results_file import read_results
from deepbench.kernels.suites import parse_where, select
from deepbench.runner.analysis import nccl_tests
from deepbench.runner.analysis.nccl_tests_side_by_side import HarnessFigure, harness_figures, pair_up, summary

from .conftest import has_cuda, requires_gpu, run_cli

FIXTURES = Path(__file__).parent / "fixtures" / "nccl-tests"
FAST = ("--fast", "--time-cap", "0.02")
# Two sizes per collective: a power of two of nccl-tests' sweep and DeepBench's 100,000 floats
# (not a multiple of 3 ranks' 16-byte shares: the layout rounds each share down).
SIZES = ("--where", "floats>=65536,floats<=100000")
OPS = tuple(COLLECTIVES_BY_OP)
RUN_TIMEOUT_S = 600


def _results(out: Path) -> list[KernelResult]:
    return read_results(out / "results.jsonl")


def _run(out: Path, *args: str, env: dict | None = None):
    return run_cli(
        "deepbench-run",
        "--local",
        "--suite",
        "collectives",
        "--out",
        str(out),
        *SIZES,
        *FAST,
        "--quiet",
        *args,
        env=env,
        timeout=RUN_TIMEOUT_S,
    )


# ----- what each collective says about itself (nccl-tests' definitions) -----------------------------
def test_layouts_and_bus_factors_follow_nccl_tests() -> None:
    by_op = {
        cls.model_fields["op"].default: cls(set="collectives", index=0, floats=100_000, repeat=1)
        for cls in COLLECTIVE_KERNELS
    }
    # nccl-tests' size is the larger buffer; shares rounded down to 16 bytes (4 floats)
    assert by_op["all_gather"].layout(3).count == 33_332 and by_op["all_gather"].layout(3).recv == 99_996
    assert by_op["reduce_scatter"].layout(3).send == 99_996 and by_op["reduce_scatter"].layout(3).recv == 33_332
    assert by_op["all_to_all"].layout(2).bytes == 400_000 and by_op["sendrecv"].layout(7).bytes == 400_000
    factors = {op: k.bus_factor(4) for op, k in by_op.items()}
    assert factors == {
        "all_reduce": 1.5,
        "all_gather": 0.75,
        "reduce_scatter": 0.75,
        "broadcast": 1.0,
        "reduce": 1.0,
        "all_to_all": 0.75,
        "sendrecv": 1.0,
    }
    assert all(k.bus_factor(1) == 0.0 for k in by_op.values())
    assert [k.IN_PLACE for k in by_op.values()] == [True, True, True, True, True, False, False]


def test_collectives_suite_is_deepbench_sizes_and_the_sweep() -> None:
    kernels = select("collectives")
    sizes = sorted(k.floats for k in kernels if k.op == "all_gather")
    assert {100_000, 3_097_600, 64_500_000} <= set(sizes)  # DeepBench's all-reduce sizes
    assert {2, 1024, 2**28} <= set(sizes) and max(sizes) == 2**28  # nccl-tests' 8 B .. 1 GiB
    assert {k.op for k in kernels} == set(OPS) and len(kernels) == len(OPS) * len(sizes)
    deepbench = {k.floats: k.repeat for k in select("train", ["all_reduce"])}
    assert all(k.repeat == deepbench[k.floats] for k in kernels if k.floats in deepbench)


class _Ranks:
    """Stands for a communicator where only the rank and size matter (the calls are not made)."""

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size

    def __getattr__(self, name: str):
        return lambda *args: None


def _model(op: str, inputs: list[np.ndarray], rank: int, count: int) -> np.ndarray | None:
    """What the collective leaves on `rank`, computed from every rank's input with numpy."""
    total = np.sum(inputs, axis=0, dtype=np.float32)
    return {
        "all_reduce": total,
        "all_gather": np.concatenate(inputs),
        "reduce_scatter": total[rank * count : (rank + 1) * count],
        "broadcast": inputs[0],
        "reduce": total if rank == 0 else None,
        "all_to_all": np.concatenate([i[rank * count : (rank + 1) * count] for i in inputs]),
        "sendrecv": inputs[(rank - 1) % len(inputs)],
    }[op]


@pytest.mark.parametrize("ranks", [2, 3, 5])
def test_every_problem_expects_what_the_collective_computes(ranks: int) -> None:
    """Each rank's expected result (computed from seeds alone, without the other ranks' buffers) is
    what the collective makes of every rank's actual input."""
    for kernel in select("collectives", where=parse_where(["floats<=100000,floats>=16"])):
        layout = kernel.layout(ranks)
        if layout.count == 0:
            continue
        jobs = [problem(kernel, _Ranks(r, ranks), seed=3) for r in range(ranks)]
        inputs = [j.inputs for j in jobs]
        given = [i for i in inputs if i.any()]  # a broadcast's non-root ranks hold zeros, as in nccl-tests
        assert all(i.size == layout.send for i in inputs) and given and len({i.tobytes() for i in given}) == len(given)
        for r, job in enumerate(jobs):
            want = _model(kernel.op, inputs, r, layout.count)
            assert (want is None and job.expected is None) or np.array_equal(want, job.expected), (kernel.id, r)


def test_inputs_depend_on_their_seeds_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drawn in chunks on several threads: the same values on one thread, on every call, and
    different for another rank, seed or share."""
    floats = 2 * values.CHUNK + 5
    many = values.rank_values(floats, 1, 7)
    monkeypatch.setattr(values, "_threads", lambda: 1)
    one = values.rank_values(floats, 1, 7)
    assert np.array_equal(many, one) and one.dtype == np.float32 and one.min() == 1 and one.max() == values.VALUE_MAX
    others = [values.rank_values(floats, 2, 7), values.rank_values(floats, 1, 8), values.rank_values(floats, 1, 7, 0)]
    assert all(not np.array_equal(one, o) for o in others)
    assert not np.array_equal(one[: values.CHUNK], one[values.CHUNK : 2 * values.CHUNK])  # chunks differ


# ----- every collective over real ranks -------------------------------------------------------------
def _assert_exact(out: Path, ranks: int) -> None:
    rs = _results(out)
    assert len(rs) == 2 * len(OPS) and all(r.status is Status.OK for r in rs), [(r.id, r.reason) for r in rs]
    for r in rs:
        kernel = r.kernel
        directions = [r.parts[0]] + ([r.info["out_of_place"]] if kernel.IN_PLACE else [])
        assert r.parts[0].direction == ("in_place" if kernel.IN_PLACE else "out_of_place")
        for d in directions:
            d = d if isinstance(d, dict) else d.model_dump(mode="json")
            check, info = d["check"], d["info"]
            held = (
                f"all {ranks} ranks hold the exact result"
                if not kernel.ROOTED
                else f"1 of {ranks} ranks hold a defined result, and it is exact"
            )
            assert check["passed"] and check["detail"] == held, (r.id, check)
            assert info["bytes"] == kernel.layout(ranks).bytes and info["bus_factor"] == kernel.bus_factor(ranks)
            assert info["busbw_gbps"] == pytest.approx(info["algbw_gbps"] * kernel.bus_factor(ranks))
            assert info["timing"] == "eager" and len(info["time_per_rank_us"]) == ranks


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["gloo", "mpi"])
@pytest.mark.parametrize("ranks", [2, 3])
def test_every_collective_exact_over_ranks(tmp_path: Path, backend: str, ranks: int) -> None:
    out = tmp_path / f"{backend}{ranks}"
    proc = _run(out, "--ranks", str(ranks), "--backend", backend)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _assert_exact(out, ranks)
    libraries = {r.info["library"] for r in _results(out)}
    assert libraries == {"mpi" if backend == "mpi" else "gloo"}


@pytest.mark.slow
@pytest.mark.parametrize("op", OPS)
def test_a_planted_wrong_value_on_one_rank_fails_the_check(tmp_path: Path, op: str) -> None:
    target = f"{op}/collectives/016"  # 100,000 floats
    rank, other = (0, 1) if COLLECTIVES_BY_OP[op].ROOTED else (1, 0)  # a reduce's result is the root's only
    out = tmp_path / op
    proc = _run(
        out,
        "--ranks",
        "2",
        "--backend",
        "gloo",
        "--ops",
        op,
        env={"DEEPBENCH_FAULT": f"wrong:{target}", "DEEPBENCH_FAULT_RANK": str(rank)},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    ok, failed = _results(out)
    assert failed.id == f"{target}/fp32" and failed.status is Status.FAILED
    held = failed.kernel.layout(2).recv  # the elements of a rank's result
    assert "check failed (exact-sum" in failed.reason and f"rank {rank}: 1 of {held} elements differ" in failed.reason
    assert f"rank {other}" not in failed.reason
    assert ok.status is Status.OK


# ----- nccl-tests' output and the side-by-side ------------------------------------------------------
def test_nccl_tests_output_is_read_exactly() -> None:
    (ar,) = nccl_tests.read(FIXTURES / "all_reduce_perf.txt")
    assert (ar.op, ar.ranks, ar.graph, ar.version, ar.nccl) == ("all_reduce", 2, False, "2.19.6", "2.28.9")
    row = next(r for r in ar.rows if r.bytes == 400_000)
    assert (row.count, row.type, row.redop, row.root) == (100_000, "float", "sum", -1)
    assert row.out_of_place.time_us == 19.71 and row.out_of_place.busbw_gbps == 20.29 and row.in_place.wrong == 0
    mixed = nccl_tests.read(FIXTURES / "graph_mixed.txt")
    assert [(o.op, o.graph, len(o.rows)) for o in mixed] == [
        ("all_gather", True, 4),
        ("all_to_all", True, 2),
        ("broadcast", True, 2),
    ]
    assert mixed[0].rows[0].bytes == 0  # two ranks leave no 16-byte share of 8 bytes
    assert mixed[1].rows[0].in_place.wrong is None and mixed[1].rows[0].out_of_place.wrong == 0
    assert mixed[2].rows[0].root == 0


@pytest.mark.parametrize(
    "text,message",
    [
        ("      400000  100000  float  sum  -1  19.7  20.3  20.3  0  19.6  20.4  20.4  0\n", "before any header"),
        ("# Collective test starting: all_reduce_perf\n 8 2 float sum -1 1.0 0.0\n", "7 fields, not nccl-tests' 13"),
        ("# Collective test starting: all_reduce_perf\n 8 2 float sum -1 x 0 0 0 1 0 0 0\n", "'x' is not a number"),
        ("# Collective test starting: hypercube_perf\n 8 2 float sum -1 1 0 0 0 1 0 0 0\n", "not one of nccl-tests'"),
    ],
)
def test_malformed_nccl_tests_output_is_one_line(text: str, message: str) -> None:
    with pytest.raises(nccl_tests.NcclTestsError, match=message):
        nccl_tests.parse(text, "f.txt")


def test_pairs_are_like_with_like_and_judged_by_the_targets() -> None:
    """Same collective, ranks, bytes, direction and method only; the targets: busbw within 5% from 4 MiB,
    time within 1.5x at 400,000 bytes (figures made up around the fixture's)."""

    def fig(
        nbytes: int,
        direction: str,
        us: float,
        busbw: float,
        method: str = "eager",
        ranks: int = 2,
        op: str = "all_reduce",
    ) -> HarnessFigure:
        return HarnessFigure(
            op=op,
            bytes=nbytes,
            ranks=ranks,
            direction=direction,
            method=method,
            library="nccl (nccl4py)",
            time_us=us,
            busbw=busbw,
            slowest_us=us,
            averaged=True,
        )

    outputs = nccl_tests.read(FIXTURES / "all_reduce_perf.txt") + nccl_tests.read(FIXTURES / "graph_mixed.txt")
    figures = [
        fig(400_000, "in_place", 29.0, 13.8),
        fig(400_000, "out_of_place", 30.0, 13.3),
        fig(16_777_216, "in_place", 72.0, 233.0),
        fig(16_777_216, "out_of_place", 80.0, 209.7),
        fig(16_777_216, "in_place", 71.0, 236.0, method="graph"),  # nccl-tests ran all-reduce eagerly only
        fig(16_777_216, "in_place", 72.0, 233.0, ranks=4),  # other ranks
        fig(16_777_216, "in_place", 41.0, 205.0, method="graph", op="all_gather"),
        fig(400_000, "in_place", 15.0, 13.3, method="graph", op="all_to_all"),
    ]  # N/A there: no figure
    pairs, alone = pair_up(figures, outputs)
    assert len(pairs) == 5 and len(alone) == 3
    judged = {(p.op, p.bytes, p.direction): (p.busbw_target, p.latency_target) for p in pairs}
    assert judged == {
        ("all_reduce", 400_000, "in_place"): (None, True),  # 29.0 / 19.64 = 1.48x
        ("all_reduce", 400_000, "out_of_place"): (None, False),  # 30.0 / 19.71 = 1.52x
        ("all_reduce", 16_777_216, "in_place"): (True, None),  # 233.0 / 236.23
        ("all_reduce", 16_777_216, "out_of_place"): (False, None),  # 209.7 / 234.98 = 0.892
        ("all_gather", 16_777_216, "in_place"): (True, None),
    }  # 205.0 / 209.19
    line = summary(pairs, len(alone))
    assert "at >= 4 MiB: 2/3 (lowest 0.892: all_reduce out_of_place eager 16777216 B; highest" in line
    assert line.endswith("harness communicators: not recorded")
    assert "within 1.5x: 1/2 (highest 1.52x: all_reduce out_of_place eager); 5 pairs, 3 harness figures" in line


@pytest.mark.slow
def test_report_sets_a_run_beside_nccl_tests(tmp_path: Path) -> None:
    out = tmp_path / "sbs"
    proc = _run(
        out, "--ranks", "2", "--backend", "gloo", "--ops", "all_reduce,all_gather", "--collective-timing", "eager"
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    pairs, alone = pair_up(harness_figures(_results(out)), nccl_tests.read(FIXTURES / "all_reduce_perf.txt"))
    # all-reduce at 400,000 B in both directions; 262,144 B has no nccl-tests row; all-gather none (graph there)
    assert [(p.op, p.bytes, p.direction) for p in pairs] == [
        ("all_reduce", 400_000, "in_place"),
        ("all_reduce", 400_000, "out_of_place"),
    ]
    assert len(alone) == 6 and pairs[0].nccl_tests_us == 19.64
    # averaged over ranks as nccl-tests -a 1 averages, the slowest rank's median beside it
    recorded = next(r for r in _results(out) if r.op == "all_reduce" and r.info["bytes"] == 400_000)
    in_place = recorded.parts[0]
    assert pairs[0].averaged and pairs[0].harness_us == in_place.info["time_mean_over_ranks_us"]
    assert pairs[0].harness_slowest_us == in_place.measurement.stats.median
    assert pairs[0].time_ratio == pytest.approx(pairs[0].harness_us / 19.64)
    line = summary(pairs, len(alone))  # gloo beside NCCL: shown, flagged, counted by no target
    assert not pairs[0].same_library and pairs[0].latency_target is None
    assert line.startswith(
        "SUMMARY: busbw within 5% of nccl-tests at >= 4 MiB: 0/0; time at 400,000 B within 1.5x: 0/0"
    )
    assert "2 pairs (2 on another library: shown, not counted), 6 harness figures without" in line
    report = run_cli(
        "deepbench",
        "report",
        str(out),
        "--nccl-tests",
        str(FIXTURES / "all_reduce_perf.txt"),
        "--nccl-tests",
        str(FIXTURES / "graph_mixed.txt"),
    )
    assert report.returncode == 0, report.stderr
    assert "All-reduce beside nccl-tests" in report.stdout and "SUMMARY:" in report.stdout
    bad = run_cli("deepbench", "report", str(out), "--nccl-tests", str(tmp_path / "none.txt"))
    assert bad.returncode == 2 and "cannot read" in bad.stderr and "Traceback" not in bad.stderr


# ----- GPUs (the lead's GPU sessions; skipped here) -------------------------------------------------
def _gpus() -> int:
    if not has_cuda():
        return 0
    import torch

    return torch.cuda.device_count()


@requires_gpu
@pytest.mark.parametrize("timing", ["graph", "eager"])
def test_every_collective_on_gpus(tmp_path: Path, timing: str) -> None:
    """Every collective at 100,000 floats on one rank per GPU (two where there are two), NCCL (through
    nccl4py where it loads), timed by graph replays or eagerly: all exact, the timing recorded."""
    ranks = min(2, _gpus())
    out = tmp_path / timing
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--platform",
        "nvidia",
        "--suite",
        "collectives",
        "--where",
        "floats=100000",
        "--ranks",
        str(ranks),
        "--collective-timing",
        timing,
        *FAST,
        "--quiet",
        "--out",
        str(out),
        timeout=RUN_TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rs = _results(out)
    alone = [r for r in rs if ranks == 1 and r.op == "sendrecv" and r.status is Status.UNSUPPORTED]
    assert all("own rank" in r.reason for r in alone)  # torch's fallback on one GPU; nccl4py sends to itself
    rs = [r for r in rs if r not in alone]
    assert len(rs) + len(alone) == len(OPS) and all(r.status is Status.OK for r in rs), [(r.id, r.reason) for r in rs]
    for r in rs:
        assert r.info["timing"] == timing and r.parts[0].check.passed, (r.id, r.parts[0].check)
        assert r.parts[0].measurement.method == (
            "collective-cuda-graph-events" if timing == "graph" else "collective-host-clock"
        )
        assert r.library["collective_library"] in ("nccl", "nccl (nccl4py)")


@pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs")
def test_a_planted_wrong_value_fails_on_gpus(tmp_path: Path) -> None:
    out = tmp_path / "wrong"
    proc = run_cli(
        "deepbench-run",
        "--local",
        "--platform",
        "nvidia",
        "--suite",
        "collectives",
        "--where",
        "floats=100000",
        "--ops",
        "all_gather,reduce_scatter",
        "--ranks",
        "2",
        *FAST,
        "--quiet",
        "--out",
        str(out),
        env={"DEEPBENCH_FAULT": "wrong:all_gather/collectives/016", "DEEPBENCH_FAULT_RANK": "1"},
        timeout=RUN_TIMEOUT_S,
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    wrong, ok = _results(out)
    assert wrong.status is Status.FAILED and "rank 1: 1 of 100000 elements differ" in wrong.reason
    assert ok.status is Status.OK


def test_min_sample_reaches_the_settings_and_the_reproduce_command() -> None:
    """--min-sample (longer samples: a collective's back-to-back calls overlap as in nccl-tests' 100-call
    launches) is recorded and repeated by a submission's reproduce command; out of range is refused."""
    import shlex

    from deepbench.runner.launch.running.request import parse_request
    from deepbench.runner.platforms import get_platform
    from deepbench.runner.submission.bundle import reproduce_command

    nvidia = get_platform("nvidia")
    settings = parse_request(["--platform", "nvidia", "--fast", "--min-sample", "0.02"]).settings()
    assert settings.min_sample_s == 0.02
    plan = Plan(run_id="r", suite="collectives", platform="nvidia", backend=nvidia.backend, settings=settings, items=())
    command = reproduce_command(plan, local=True, image_digest=None)
    assert "--min-sample 0.02" in command
    assert parse_request(shlex.split(command)[1:]).settings(nvidia).min_sample_s == 0.02
    bad = run_cli("deepbench-run", "--local", "--suite", "smoke", "--min-sample", "5", "--out", "/nonexistent/x")
    assert bad.returncode == 2 and "--min-sample" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    ("asked", "libnccl", "config", "says"),
    [
        ("nccl-tests", "2.28.9", {"nvlink_centric_sched": True}, "nccl-tests"),
        ("nccl-tests", "2.27.7", None, "has no nvlinkCentricSched"),
        ("nccl-defaults", "2.28.9", None, "NCCL's defaults"),
    ],
)
def test_nccl4py_communicators_are_configured_as_asked(asked: str, libnccl: str, config, says: str) -> None:
    """--nccl-comm-config: nccl-tests' own communicator settings (nvlinkCentricSched=1 from NCCL
    2.28.2 on, src/common.cu initComms) or NCCL's defaults, and the record says which (a fake
    nccl4py module: its real one needs a GPU)."""
    from types import SimpleNamespace

    from deepbench.kernels.backends.collectives.declaration import COLLECTIVES
    from deepbench.kernels.backends.nccl.nccl4py_comm import Nccl4pyCommunicator
    from deepbench.kernels.results import Settings

    comm = Nccl4pyCommunicator.__new__(Nccl4pyCommunicator)  # only _config: no ranks, no NCCL
    comm.nccl = SimpleNamespace(
        get_version=lambda: SimpleNamespace(libnccl=SimpleNamespace(version=libnccl)),
        NCCLConfig=lambda **kw: kw,
    )
    settings = Settings(backend_options={"nccl": COLLECTIVES.stored(COLLECTIVES.options(comm_config=asked))})
    made, record = comm._config(settings)
    assert made == config and says in record
