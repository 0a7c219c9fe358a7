"""Real models as operator datasets, suites and operator-level reports.

  deepbench models list                                   # the models and where each definition comes from
  deepbench models extract resnet50 --batch 32 --out resnet50.json
  deepbench models extract bert-base --seq 384 --out bert.json --format json
  deepbench-run --local --suite model:resnet50 --batch 1  # run its GEMMs and convolutions
  deepbench models report deepbench-results/RUN           # time share per operator type

Extraction builds the model on PyTorch's meta device (shapes, no weights) and records every
operator the dispatcher sees; it needs torch, listing and reporting do not."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.table import Table

from ...kernels.models import MODELS
from ...kernels.results import RESULTS_FILE, read_results
from ..display import make_console
from ..errors import UserError
from ..model_report import FORWARD, model_reports

NAME = "models"
HELP = "operator datasets of real models (ResNet-50, BERT, GPT-2, Llama ...) and their reports"
TOP_OPERATORS = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="models_command", metavar="ACTION", parser_class=type(parser))
    sub.add_parser("list", help="the models and the source of each definition")
    ex = sub.add_parser("extract", help="a model's operators (shapes, counts, FLOPs) as a JSON dataset")
    ex.add_argument("model", metavar="MODEL", help=", ".join(MODELS))
    ex.add_argument("--batch", type=int, default=1, metavar="N", help="batch size (default 1)")
    ex.add_argument("--seq", type=int, metavar="N", help="sequence length for language models (default: the model's)")
    ex.add_argument("--out", type=Path, metavar="FILE", help="write the dataset here (JSON)")
    ex.add_argument("--format", choices=("table", "json"), default="table",
                    help="what to print: a summary table (default) or the dataset as JSON")
    rep = sub.add_parser("report", help="time share per operator type of a model-suite run")
    rep.add_argument("run", type=Path, metavar="RUN", help="a results folder of deepbench-run --suite model:NAME")
    rep.add_argument("--directions", choices=(FORWARD, "all"), default=FORWARD,
                     help="fwd: inference, forward only (default); all: every timed direction summed")
    rep.add_argument("--format", choices=("table", "json"), default="table")


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "models_command", None)
    if action == "list":
        return _list()
    if action == "extract":
        return _extract(args)
    if action == "report":
        return _report(args)
    raise UserError("say what to do: deepbench models list | extract MODEL | report RUN")


def _list() -> int:
    table = Table(title="models (deepbench models extract NAME; deepbench-run --suite model:NAME)",
                  title_justify="left")
    for col in ("name", "input", "default seq", "definition"):
        table.add_column(col, overflow="fold")
    for m in MODELS.values():
        shape = "image 3x224x224" if m.input == "image" else "token ids" if m.input == "tokens" else "hidden states"
        table.add_row(m.name, shape, str(m.default_seq or ""), m.source)
    make_console().print(table)
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
        raise UserError(f"extraction needs torch: pip install 'deepbench[torch]' ({exc})") from None
    from ...kernels.models.suite import dataset_kernels, kernel_for

    ds = extract(args.model, batch=args.batch, seq=args.seq)
    if args.out:
        ds.save(args.out)
    if args.format == "json":
        print(ds.model_dump_json(indent=1))
        return 0
    kernels, _ = dataset_kernels(ds)
    table = Table(title=f"{ds.model}: batch {ds.batch}" + (f", seq {ds.seq}" if ds.seq else "") +
                  f", {ds.parameters / 1e6:.1f}M parameters, {ds.total_flops() / 1e9:.2f} GFLOP per forward pass",
                  title_justify="left")
    for col in ("type", "distinct", "calls", "GFLOP", "runs as"):
        table.add_column(col, justify="right" if col in ("distinct", "calls", "GFLOP") else "left")
    for op_type in dict.fromkeys(o.type for o in ds.operators):
        mapped = [kernel_for(o, ds.model) for o in ds.of_type(op_type)]
        runs = "; ".join(dict.fromkeys(m if isinstance(m, str) else f"{m.op} kernel" for m in mapped))
        table.add_row(op_type, str(len(ds.of_type(op_type))), str(ds.calls(op_type)),
                      f"{ds.total_flops(op_type) / 1e9:.3f}", runs)
    console = make_console()
    console.print(table)
    console.print(f"{len(kernels)} distinct kernels for --suite model:{ds.model}" +
                  (f"; dataset in {args.out}" if args.out else ""))
    return 0


def _report(args: argparse.Namespace) -> int:
    path = args.run / RESULTS_FILE
    if not path.exists():
        raise UserError(f"{args.run} has no {RESULTS_FILE} (is it a deepbench-run results folder?)")
    reports = model_reports(read_results(path), args.directions)
    if not reports:
        raise UserError(f"{args.run} holds no model-suite results (run deepbench-run --suite model:NAME)")
    if args.format == "json":
        print(json.dumps([r.as_dict() for r in reports], indent=1))
        return 0
    console = make_console()
    for rep in reports:
        t = Table(title=f"{rep.model} {rep.precision} ({'forward' if rep.directions == FORWARD else 'all directions'}): "
                  f"{rep.total_us / 1e3:.3f} ms in its measured operators, weighted by calls per forward pass",
                  title_justify="left")
        for col in ("type", "kernels", "calls", "time ms", "share", "GFLOP", "TFLOP/s", "GB/s"):
            t.add_column(col, justify="left" if col == "type" else "right")
        for s in rep.types:
            t.add_row(s.op, str(s.kernels), str(s.calls), f"{s.time_us / 1e3:.3f}", f"{100 * s.share:.1f}%",
                      f"{s.flops / 1e9:.3f}" if s.flops else "", f"{s.tflops:.3f}" if s.tflops else "", f"{s.gbps:.2f}" if s.gbps else "")
        console.print(t)
        top = Table(title=f"top operators of {rep.model} {rep.precision}", title_justify="left")
        for col in ("kernel", "shape", "calls", "us per call", "share"):
            top.add_column(col, justify="left" if col in ("kernel", "shape") else "right")
        for o in rep.operators[:TOP_OPERATORS]:
            top.add_row(o.id, o.label, str(o.count), f"{o.time_us:.1f}", f"{100 * o.share:.1f}%")
        console.print(top)
        if rep.not_measured:
            console.print(f"[yellow]not measured ({len(rep.not_measured)}):[/] " + "; ".join(rep.not_measured))
    return 0
