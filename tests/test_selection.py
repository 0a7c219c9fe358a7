"""The selection parsed once (runner/selection.py) and the plan's items derived from it
(runner/launch/running/planning.py), shared by deepbench-run, provenance and the submission checker."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from deepbench.kernels import provenance
from deepbench.kernels.format_versions import read_model
from deepbench.kernels.precision import Precision
from deepbench.kernels.results import Plan, PlanItem
from deepbench.kernels.suites import SelectionError, select
from deepbench.runner import selection as selection_module
from deepbench.runner.errors import UserError
from deepbench.runner.launch.running.planning import declared_items, plan_items
from deepbench.runner.platforms import get_platform
from deepbench.runner.selection import KernelSelection, add_selection_arguments

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED_PLANS = sorted((ROOT / "runner" / "published").glob("*/*/plan.json"))


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_selection_arguments(parser)
    parser.add_argument("--precision")
    return parser.parse_args(list(argv))


def test_the_command_line_is_parsed_once_into_typed_values() -> None:
    chosen = KernelSelection.from_args(
        _args(
            "--suite",
            "train",
            "--ops",
            "gemm, conv",
            "--where",
            "m=1760",
            "--limit",
            "2",
            "--precision",
            "fp16,bf16,fp16",
        )
    )
    assert chosen.ops == ("gemm", "conv")
    assert chosen.precisions == (Precision.FP16, Precision.BF16, Precision.FP16)
    assert all(isinstance(p, Precision) for p in chosen.precisions)
    assert [c.field for c in chosen.conditions] == ["m"]
    assert list(chosen.kernels) == select("train", ["gemm", "conv"], chosen.conditions, 2)


@pytest.mark.parametrize(
    "argv, words",
    [
        (("--ops", "gemm,nope"), "unknown operation 'nope'"),
        (("--precision", "fp64"), "unknown precision 'fp64'"),
        (("--where", "m~3"), "malformed filter"),
    ],
)
def test_a_mistake_is_a_user_error_naming_it(argv: tuple[str, ...], words: str) -> None:
    with pytest.raises(UserError, match=words):
        KernelSelection.from_args(_args(*argv))


def test_the_suite_is_built_once_for_its_kernels_and_its_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = selection_module.suite_kernels

    def counted(*args: object) -> object:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(selection_module, "suite_kernels", counted)
    chosen = KernelSelection.from_args(_args("--suite", "train", "--ops", "rnn"))
    assert chosen.kernels and chosen.frozen_suite_sha256 and chosen.kernels
    assert len(calls) == 1
    assert chosen.frozen_suite_sha256 == provenance.frozen_suite_sha256("train")


def test_a_suite_that_cannot_be_built_says_so_when_its_kernels_are_asked_for() -> None:
    chosen = KernelSelection(suite="no-such-suite")
    with pytest.raises(SelectionError, match="unknown suite"):
        _ = chosen.kernels


def test_the_record_keeps_the_platforms_defaults_only_where_no_precision_was_asked() -> None:
    defaults = {"train/gemm": ("fp32", "fp16")}
    asked = KernelSelection(suite="train", precisions=(Precision.TF32,))
    assert asked.record(defaults).precisions == (Precision.TF32,)
    assert asked.record(defaults).default_precisions is None
    assert KernelSelection(suite="train").record(defaults).default_precisions == defaults


def test_plan_items_hold_precisions_and_write_them_by_name() -> None:
    kernels = select("train", ["gemm", "all_reduce"], limit=1)
    items = plan_items(kernels, [Precision.FP16, "bf16"], get_platform("cpu"))
    assert [(i.kernel.op, i.precision) for i in items] == [
        ("gemm", Precision.FP16),
        ("gemm", Precision.BF16),
        ("all_reduce", Precision.FP32),
    ]
    assert items[0].id == "gemm/train/000/fp16"
    assert json.loads(items[0].model_dump_json())["precision"] == "fp16"
    assert PlanItem.model_validate_json(items[0].model_dump_json()) == items[0]


@pytest.mark.parametrize("path", PUBLISHED_PLANS, ids=lambda p: str(p.parent.relative_to(ROOT / "runner")))
def test_published_plans_read_back_as_they_were_written(path: Path) -> None:
    """Their items, written again, are the same JSON; the checker's scope and both suite hashes
    derived from the one selection are those the run recorded."""
    text = path.read_text()
    plan = read_model(Plan, text)
    assert [json.loads(i.model_dump_json()) for i in plan.items] == json.loads(text)["items"]
    run = json.loads((path.parent / "run.json").read_text())["provenance"]
    chosen = KernelSelection.from_plan(plan)
    assert chosen.frozen_suite_sha256 == run["frozen_suite_sha256"]
    assert provenance.items_sha256(plan.items) == run["suite_sha256"]
    sel = plan.selection
    if sel is not None and (sel.precisions or sel.default_precisions):  # older plans: today's defaults differ
        assert {i.id for i in declared_items(plan)} == {i.id for i in plan.items}


def test_the_checker_takes_the_plans_scope_from_outside_the_command_line_module() -> None:
    from deepbench.runner.submission import checker

    assert checker.declared_items is declared_items
    source = (ROOT / "runner" / "submission" / "checker.py").read_text()
    assert not any(f"running.{command} import" in source for command in ("run", "request", "new_plan"))
