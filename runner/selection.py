"""Which kernels a command asks for: the selection options shared by `deepbench list` and
`deepbench-run`, parsed once into a `KernelSelection` that the plan, its provenance and the
submission checker all read.

The command line (or a plan's recorded selection) is parsed here and nowhere else: operations
are checked against the catalog, filters into conditions, precisions into `Precision`s. The
named suite is built once per selection; the kernels chosen from it and the hash of the whole
suite (provenance's `frozen_suite_sha256`) both come from that one build."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from functools import cached_property

from ..kernels.backends.contract.declared_precisions import makers_of
from ..kernels.catalog import OPS, Kernel
from ..kernels.precision import DECLARED_ONLY, PRECISIONS, Precision, parse_precisions
from ..kernels.provenance import kernels_sha256
from ..kernels.results import Plan, Selection
from ..kernels.suites import SUITES, Condition, SelectionError, narrow, parse_ops, parse_where, suite_kernels
from .errors import UserError


def add_selection_arguments(
    parser: argparse.ArgumentParser, default_suite: str | None = "smoke", with_precision: bool = False
) -> None:
    """The selection group; `with_precision`: --precision too (deepbench-run's, which runs them)."""
    g = parser.add_argument_group("kernel selection")
    g.add_argument(
        "--suite",
        default=default_suite,
        metavar="SUITE",
        help=f"{', '.join(SUITES)}, model:NAME (default: {default_suite}); the first three are DeepBench's "
        "sets; sparse-2of4 is DeepBench's sparse GEMM shapes with 2:4 structured sparsity "
        "(not part of DeepBench's 629); model:NAME runs a real model's operators "
        "(deepbench models list)",
    )
    g.add_argument("--ops", metavar="OPS", help=f"comma-separated operations: {', '.join(OPS)} (default: all)")
    g.add_argument(
        "--where",
        action="append",
        metavar="COND",
        help="keep kernels whose parameters match, e.g. m=1760, cell=lstm, n<=64 (repeatable; all must hold)",
    )
    g.add_argument("--limit", type=int, metavar="N", help="at most N kernels per operation")
    g.add_argument("--batch", type=int, metavar="N", help="model suites: batch size (default 1)")
    g.add_argument("--seq", type=int, metavar="N", help="model suites: sequence length (default: the model's)")
    if with_precision:
        g.add_argument("--precision", metavar="P", help=_precision_help())


def _precision_help() -> str:
    """--precision's help: every precision, those that name one library call's arithmetic with the
    backends that declare them (kernels/backends/contract/declared_precisions.py)."""
    common = ", ".join(p.value for p in Precision if p not in DECLARED_ONLY)
    declared_only = "; ".join(
        f"{p.value} ({PRECISIONS[p].description}; the {', '.join(makers_of(p))} backend only)" for p in DECLARED_ONLY
    )
    return f"comma-separated: {common}, or {declared_only} (default: the platform's DeepBench precisions for the suite)"


@dataclass(frozen=True)
class KernelSelection:
    """A suite and the choice made within it. `where` keeps the filters as written (the plan
    records them so); `conditions` is what they parse to. `precisions` None: the platform's
    defaults for each operation (runner/launch/running/planning.py). Raises SelectionError when a filter does
    not parse; the suite itself is built, and checked, when the kernels are first asked for."""

    suite: str
    ops: tuple[str, ...] | None = None
    where: tuple[str, ...] = ()
    limit: int | None = None
    batch: int | None = None
    seq: int | None = None
    precisions: tuple[Precision, ...] | None = None
    conditions: tuple[Condition, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "conditions", tuple(parse_where(self.where)))

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> KernelSelection:
        """The selection options of `deepbench list` or `deepbench-run` (`--precision`: the
        latter's only); a mistake in any of them is a UserError naming the valid choices."""
        try:
            ops = parse_ops(args.ops)
            text = getattr(args, "precision", None)
            return cls(
                suite=args.suite,
                ops=tuple(ops) if ops else None,
                where=tuple(args.where or ()),
                limit=args.limit,
                batch=getattr(args, "batch", None),
                seq=getattr(args, "seq", None),
                precisions=tuple(parse_precisions(text)) if text else None,
            )
        except ValueError as exc:  # SelectionError, or an unknown precision
            raise UserError(str(exc)) from None

    @classmethod
    def from_plan(cls, plan: Plan) -> KernelSelection:
        """The scope a plan declares: its suite and recorded selection (the whole suite for a plan
        made before selections were recorded). Raises SelectionError when it does not parse here."""
        sel = plan.selection
        if sel is None:
            return cls(suite=plan.suite)
        return cls(
            suite=plan.suite,
            ops=tuple(sel.ops) if sel.ops else None,
            where=tuple(sel.where),
            limit=sel.limit,
            batch=sel.batch,
            seq=sel.seq,
            precisions=tuple(sel.precisions) if sel.precisions else None,
        )

    @cached_property
    def suite_kernels(self) -> tuple[Kernel, ...]:
        """The named suite before selection, built once for this selection."""
        return tuple(suite_kernels(self.suite, self.batch, self.seq))

    @cached_property
    def kernels(self) -> tuple[Kernel, ...]:
        """The selected kernels, in the suite's order."""
        return tuple(narrow(self.suite_kernels, self.ops, self.conditions, self.limit))

    @cached_property
    def frozen_suite_sha256(self) -> str:
        """Provenance's hash of the whole named suite (kernels/provenance.py), from the same build."""
        return kernels_sha256(self.suite_kernels)

    def record(self, default_precisions: dict[str, tuple[str, ...]] | None = None) -> Selection:
        """What a plan records of this selection, with the platform's precisions per '<set>/<op>'
        where none were asked for (`deepbench check` re-derives the kernels from it)."""
        return Selection(
            ops=self.ops,
            where=self.where,
            limit=self.limit,
            precisions=self.precisions,
            default_precisions=default_precisions if self.precisions is None else None,
            batch=self.batch,
            seq=self.seq,
        )


def selected_kernels(args: argparse.Namespace) -> list[Kernel]:
    """The kernels the command line selects (`deepbench list`); mistakes are UserErrors."""
    selection = KernelSelection.from_args(args)
    try:
        return list(selection.kernels)
    except SelectionError as exc:
        raise UserError(str(exc)) from None
