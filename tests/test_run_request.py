"""deepbench-run's command line parsed once into a frozen, typed RunRequest (runner/launch/running/request.py):
every argument is checked when the request is made, so a mistake is one line and exit status 2 before a
results folder exists or a harness starts, and below the entry point only the request travels."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from deepbench.runner.cli import run_main
from deepbench.runner.errors import UserError
from deepbench.runner.launch.images.container_options import ContainerOptions
from deepbench.runner.launch.running.new_plan import plan_for
from deepbench.runner.launch.running.request import parse_request
from deepbench.runner.launch.running.run_folder import NewRun, Resume

from .conftest import run_cli

REPO = Path(__file__).resolve().parents[1]
EXIT_USAGE = 2


def test_an_unknown_backend_is_one_line_before_the_folder_or_the_harness(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("deepbench-run", "--local", "--backend", "nosuch", "--suite", "smoke", "--out", str(out))
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    assert len(lines) == 1 and "unknown backend 'nosuch'" in lines[0] and "Traceback" not in proc.stderr
    assert not out.exists()  # no folder, so no plan, no run.json and no harness.log either


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--platform", "nosuch"], "unknown platform 'nosuch'"),
        (["--suite", "smoke"], "say where to run"),
        (["--local", "--suite", "nosuch"], "unknown suite 'nosuch'"),
        (["--local", "--ops", ""], "--ops is empty"),
        (["--local", "--where", "m=99999"], "matches no kernel"),
        (["--local", "--precision", "fp7"], "fp7"),
        (["--local", "--time-cap", "700"], "must be shorter than --kernel-timeout"),
        (["--local", "--lock-clocks", "max"], "this run is on a CPU"),
        (["--local", "--ranks", "2"], "runs collectives only"),
        (["--local", "--image", "x", "--memory", "8g"], "--image, --memory apply to container runs"),
        (["--local", "--pids-limit", "4"], "--pids-limit applies to container runs"),
        (["--platform", "nvidia", "--pids-limit", "-1"], "--pids-limit takes a positive number"),
        (["--platform", "nvidia", "--memory", "8q"], "--memory takes a size"),
        (["--local", "--env", "NOVALUE"], "--env takes NAME=VALUE"),
        (["--local", "--retry", "failed"], "name its folder with --resume"),
        (["--local", "--launch", "srun x"], "name its folder with --resume"),
    ],
)
def test_a_wrong_or_contradictory_argument_is_one_line_and_nothing_is_written(
    tmp_path: Path, capsys, argv: list[str], says: str
) -> None:
    out = tmp_path / "out"
    assert run_main([*argv, "--out", str(out)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err, err
    assert not out.exists()


def test_a_launch_command_that_does_not_run_this_plan_is_refused_with_the_request(tmp_path: Path) -> None:
    command = "srun python -m deepbench.kernels.harness elsewhere/plan.json elsewhere"
    with pytest.raises(UserError, match="not on this run"):
        parse_request(["--resume", str(tmp_path), "--launch", command])


def test_the_request_is_typed_and_frozen() -> None:
    request = parse_request(
        ["--platform", "nvidia", "--fast", "--seed", "7", "--ops", "gemm", "--precision", "fp16", "--image", "x:1"]
    )
    assert isinstance(request.mode, NewRun) and request.platform is not None and request.platform.name == "nvidia"
    assert (request.measurement.mode, request.measurement.seed) == ("fast", 7)
    assert request.selection.ops == ("gemm",) and [p.value for p in request.selection.precisions or ()] == ["fp16"]
    assert request.container == ContainerOptions(image="x:1")
    assert {"platform", "mode", "seed", "ops", "precision", "image"} <= request.explicit
    assert "kernel_timeout" not in request.explicit  # left at its default
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.ranks = 4  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.measurement.seed = 1  # type: ignore[misc]


def test_a_resume_names_its_folder_what_it_retries_and_no_platform(tmp_path: Path) -> None:
    request = parse_request(["--resume", str(tmp_path), "--retry", "timeout,failed"])
    assert request.mode == Resume(tmp_path, ("timeout", "failed"), None) and request.platform is None


def test_the_backends_options_are_parsed_by_their_declarations_and_named_ones_kept() -> None:
    request = parse_request(["--platform", "nvidia", "--layout", "both"])
    asked = {a.key: a for a in request.backend_options}
    assert asked["cudnn"].options.layout == "both" and asked["cudnn"].flags == ("--layout",)
    assert not asked["nccl"].named
    plan, _ = plan_for(request)
    assert plan.settings.backend_options["cudnn"]["layout"] == "both"


def test_precision_is_in_the_selection_group(capsys) -> None:
    with pytest.raises(SystemExit):
        run_main(["--help"])
    shown = capsys.readouterr().out
    selection = shown[shown.index("kernel selection:") :]
    assert "--precision P" in selection[: selection.index("\n\n")]


# The functions that read argparse's Namespace into the request; nothing else under runner/launch takes it.
READERS = {"from_args", "mode_from", "_refuse_empty"}


def test_no_module_below_the_entry_point_takes_the_namespace() -> None:
    takers = []
    for path in sorted((REPO / "runner" / "launch").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name in READERS:
                continue
            arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            if any(a.annotation is not None and "Namespace" in ast.unparse(a.annotation) for a in arguments):
                takers.append(f"{path.relative_to(REPO)}:{node.name}")
    assert not takers, f"take argparse's Namespace instead of the RunRequest: {takers}"


def test_launch_command_plans_what_deepbench_run_would_for_its_ranks(tmp_path: Path, capsys) -> None:
    from deepbench.kernels.catalog import operations, traits_of
    from deepbench.kernels.results import Plan
    from deepbench.runner.cli import main

    out = tmp_path / "plan"
    assert main(["launch-command", "--nodes", "2", "--gpus-per-node", "2", "--engine", "srun", "--out", str(out)]) == 0
    assert "4 ranks = 2 nodes x 2" in capsys.readouterr().out
    written = Plan.model_validate_json((out / "plan.json").read_text())
    collectives = ",".join(op for op in operations() if traits_of(op).collective)
    same, _ = plan_for(parse_request(["--local", "--suite", "train", "--ops", collectives, "--ranks", "4"]))
    assert (written.backend, written.settings, written.items) == (same.backend, same.settings, same.items)
