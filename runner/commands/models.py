"""Real models as operator datasets, suites and operator-level reports.

  deepbench models list                                   # the models and where each definition comes from
  deepbench models extract resnet50 --batch 32 --out resnet50.json
  deepbench models extract bert-base --seq 384 --out bert.json --format json
  deepbench-run --local --suite model:resnet50 --batch 1  # run its GEMMs and convolutions
  deepbench models report deepbench-results/RUN           # time share per operator type, % of the device's peaks
  deepbench models compare RUN_A RUN_B --precision fp32   # per operator type: speed-up vs peak FLOPS ratio

Extraction builds the model on PyTorch's meta device (shapes, no weights) and records every
operator the dispatcher sees; it needs torch, listing and reporting do not."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ...kernels.models import EXTRACTION_NEEDS, MODELS
from ...kernels.precision import Precision
from ..analysis.model_compare import DEPARTURE_FACTOR, ModelComparison, compare_runs
from ..analysis.model_level import ModelLevel, model_levels
from ..analysis.model_report import FORWARD, ModelReport, load_model_run, model_reports
from ..errors import UserError
from ..outpaths import writable_file
from ..render.display import make_console, print_tables
from ..render.model_tables import HOW_TO_SEE, comparison_table, ratio_text, top_table, type_table
from ..render.tables import Table

NAME = "models"
HELP = "operator datasets of real models (ResNet-50, BERT, GPT-2, Llama ...) and their reports"
TOP_OPERATORS = 10
LISTED_IDS = 8  # longer lists of unmatched kernels are summed per operation in the table output


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="models_command", metavar="ACTION", parser_class=type(parser))
    sub.add_parser("list", help="the models and the source of each definition")
    ex = sub.add_parser("extract", help="a model's operators (shapes, counts, FLOPs) as a JSON dataset")
    ex.add_argument("model", metavar="MODEL", help=", ".join(MODELS))
    ex.add_argument("--batch", type=int, default=1, metavar="N", help="batch size (default 1)")
    ex.add_argument("--seq", type=int, metavar="N", help="sequence length for language models (default: the model's)")
    ex.add_argument("--out", type=Path, metavar="FILE", help="write the dataset here (JSON)")
    ex.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="what to print: a summary table (default) or the dataset as JSON",
    )
    rep = sub.add_parser("report", help="time share per operator type of a model-suite run")
    rep.add_argument("run", type=Path, metavar="RUN", help="a results folder of deepbench-run --suite model:NAME")
    rep.add_argument(
        "--directions",
        choices=(FORWARD, "all"),
        default=FORWARD,
        help="fwd: inference, forward only (default); all: every timed direction summed",
    )
    rep.add_argument("--format", choices=("table", "json"), default="table")
    cmp = sub.add_parser("compare", help="two devices per operator type: speed-up next to the peak FLOPS ratio")
    cmp.add_argument("run_a", type=Path, metavar="RUN_A", help="results folder of a model suite on device A")
    cmp.add_argument("run_b", type=Path, metavar="RUN_B", help="the same model suite and batch on device B")
    cmp.add_argument(
        "--precision",
        choices=[p.value for p in Precision],
        metavar="P",
        help="compare this precision only (default: every precision both runs measured)",
    )
    cmp.add_argument(
        "--directions",
        choices=(FORWARD, "all"),
        default=FORWARD,
        help="fwd: inference, forward only (default); all: every timed direction summed",
    )
    cmp.add_argument(
        "--factor",
        type=float,
        default=DEPARTURE_FACTOR,
        metavar="F",
        help=f"flag a type whose speed-up is more than F times above or below the peak FLOPS ratio "
        f"(default {DEPARTURE_FACTOR:g})",
    )
    cmp.add_argument("--format", choices=("table", "json"), default="table")


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "models_command", None)
    if action == "list":
        return _list()
    if action == "extract":
        return _extract(args)
    if action == "report":
        return _report(args)
    if action == "compare":
        return _compare(args)
    raise UserError("say what to do: deepbench models list | extract MODEL | report RUN | compare RUN_A RUN_B")


def _list() -> int:
    rows = []
    for m in MODELS.values():
        shape = "image 3x224x224" if m.input == "image" else "token ids" if m.input == "tokens" else "hidden states"
        rows.append([m.name, shape, str(m.default_seq or ""), m.source])
    print_tables(
        make_console(),
        [
            Table(
                "models",
                "models (deepbench models extract NAME; deepbench-run --suite model:NAME)",
                ["name", "input", "default seq", "definition"],
                rows,
                wrap=("definition",),
            )
        ],
    )
    return 0


def _extract(args: argparse.Namespace) -> int:
    if args.model not in MODELS:
        raise UserError(f"unknown model '{args.model}' (choose from: {', '.join(MODELS)})")
    if args.batch < 1 or (args.seq is not None and args.seq < 1):
        raise UserError("--batch and --seq must be at least 1")
    if args.seq is not None and MODELS[args.model].input == "image":
        raise UserError(f"{args.model} takes images: --seq does not apply")
    try:
        from ...kernels.models.extract import extract
    except ImportError as exc:
        raise UserError(f"extraction needs {EXTRACTION_NEEDS} ({exc})") from None
    from ...kernels.models.suite import dataset_kernels, kernel_for

    if args.out:
        writable_file(args.out)
    ds = extract(args.model, batch=args.batch, seq=args.seq)
    if args.out:
        ds.save(args.out)
    if args.format == "json":
        print(ds.model_dump_json(indent=1))
        return 0
    kernels, _ = dataset_kernels(ds)
    rows = []
    for op_type in dict.fromkeys(o.type for o in ds.operators):
        mapped = [kernel_for(o, ds.model) for o in ds.of_type(op_type)]
        runs = "; ".join(dict.fromkeys(m if isinstance(m, str) else f"{m.op} kernel" for m in mapped))
        rows.append(
            [
                op_type,
                str(len(ds.of_type(op_type))),
                str(ds.calls(op_type)),
                f"{ds.total_flops(op_type) / 1e9:.3f}",
                runs,
            ]
        )
    title = (
        f"{ds.model}: batch {ds.batch}"
        + (f", seq {ds.seq}" if ds.seq else "")
        + f", {ds.parameters / 1e6:.1f}M parameters, {ds.total_flops() / 1e9:.2f} GFLOP per forward pass"
    )
    console = make_console()
    print_tables(
        console,
        [Table("model-extract", title, ["type", "distinct", "calls", "GFLOP", "runs as"], rows, wrap=("runs as",))],
    )
    console.print(
        f"{len(kernels)} distinct kernels for --suite model:{ds.model}"
        + (f"; dataset in {args.out}" if args.out else "")
    )
    return 0


def _report(args: argparse.Namespace) -> int:
    run = load_model_run(args.run)
    reports = model_reports(run.results, args.directions, run.ceilings, run.device)
    if not reports:
        raise UserError(f"{args.run} holds no model-suite results (run deepbench-run --suite model:NAME)")
    levels = {(lv.model, lv.precision): lv for lv in model_levels(run.results, args.directions)}
    if args.format == "json":
        print(
            json.dumps(
                [
                    {
                        **r.as_dict(),
                        "model_level": levels[(r.model, r.precision)].as_dict()
                        if (r.model, r.precision) in levels
                        else None,
                    }
                    for r in reports
                ],
                indent=1,
            )
        )
        return 0
    console = make_console()
    for rep in reports:
        print_tables(console, [type_table(rep)], how_to_see=HOW_TO_SEE)
        _print_peaks(console, rep)
        print_tables(console, [top_table(rep, TOP_OPERATORS)])
        if rep.not_measured:
            console.print(f"[yellow]not measured ({len(rep.not_measured)}):[/] " + escape("; ".join(rep.not_measured)))
        if (rep.model, rep.precision) in levels:
            _print_model_level(console, levels[(rep.model, rep.precision)])
    return 0


def _print_model_level(console: Console, lv: ModelLevel) -> None:
    """The whole model's forward pass beside its operators' sum: what fusion and overhead change."""
    if lv.whole_us is None:
        console.print(f"whole model: {lv.whole_status}{': ' + escape(lv.whole_reason) if lv.whole_reason else ''}")
        return
    covered = f", the operators hold {100 * lv.flops_covered:.0f}% of its FLOPs" if lv.flops_covered else ""
    console.print(
        f"whole model ({lv.model}, batch {lv.batch}, {lv.precision}): {lv.whole_us / 1e3:.3f} ms a forward "
        f"pass, {lv.throughput_per_s:.1f} inputs/s; operator sum {lv.operator_sum_us / 1e3:.3f} ms "
        f"= {ratio_text(lv.ratio)} the whole model{covered} (above 1: fusion and overlap win; below 1: "
        f"overhead and unmeasured operators cost)"
    )


def _print_peaks(console: Console, rep: ModelReport) -> None:
    """The measured peaks the percentages are of, or why there are none."""
    peaks = [
        f"compute {rep.peak_tflops:.1f} TFLOP/s ({rep.precision})" if rep.peak_tflops else "",
        f"copy bandwidth {rep.peak_gbps:.0f} GB/s" if rep.peak_gbps else "",
    ]
    shown = ", ".join(p for p in peaks if p)
    if shown:
        console.print(
            f"[dim]measured peaks of this run: {shown}; bound: the roofline limit most of the type's "
            f"time falls under; % of roof: time on the roofline over the measured time[/]"
        )
    if rep.peaks_note:
        console.print(f"[dim]no % of peak{' for the rest' if shown else ''}: {escape(rep.peaks_note)}[/]")


def _compare(args: argparse.Namespace) -> int:
    cmp = compare_runs(
        load_model_run(args.run_a), load_model_run(args.run_b), args.precision, args.directions, args.factor
    )
    if args.format == "json":
        print(json.dumps(cmp.as_dict(), indent=1))
        return 0
    _print_comparison(cmp)
    return 0


def _print_comparison(cmp: ModelComparison) -> None:
    console = make_console()
    console.print(f"A: {escape(cmp.device_a)} ({escape(cmp.run_a)})\nB: {escape(cmp.device_b)} ({escape(cmp.run_b)})")
    for pc in cmp.precisions:
        print_tables(console, [comparison_table(cmp, pc)], how_to_see=HOW_TO_SEE)
        console.print(
            f"[dim]speed-up: A's time over B's (above 1: B is faster), matched kernels weighted by calls "
            f"per forward pass; flagged where the device with more peak FLOPS is slower on the type, or the "
            f"speed-up is more than {cmp.factor:g}x above or below the peak FLOPS ratio[/]"
        )
        if pc.ratio_note:
            console.print(f"[yellow]no peak ratio, no flags:[/] {escape(pc.ratio_note)}")
        for side, ids in (("A", pc.only_a), ("B", pc.only_b)):
            if ids:
                console.print(f"[yellow]only in {side} ({len(ids)}), not compared:[/] " + escape(_ids_summary(ids)))
    for note in cmp.notes:
        console.print(f"[yellow]{escape(note)}[/]")


def _ids_summary(ids: list[str]) -> str:
    """A few kernel ids as they are; many as a count per operation (JSON output lists them all)."""
    if len(ids) <= LISTED_IDS:
        return "; ".join(ids)
    per_op: dict[str, int] = {}
    for i in ids:
        per_op[i.split("/", 1)[0]] = per_op.get(i.split("/", 1)[0], 0) + 1
    return ", ".join(f"{op} {n}" for op, n in per_op.items()) + " (every id: --format json)"
