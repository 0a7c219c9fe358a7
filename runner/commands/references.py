"""DeepBench's published results, shipped as references usable wherever a run is.

  deepbench references                    # name, processor, set, kernels per precision, source
  deepbench compare RUN --reference V100  # this run against DeepBench's V100, kernel by kernel
  deepbench report V100 --format html     # a reference as a report

A name is set/processor (train/V100, server/T4) or the processor alone where it is unique."""

from __future__ import annotations

import argparse
from typing import Any

from ..analysis.references import references
from ..render.display import make_console, print_tables
from ..render.tables import Table

NAME = "references"
HELP = "list DeepBench's published results usable as references"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("table", "json"), default="table")


def run(args: argparse.Namespace) -> int:
    import json

    refs = references()
    rows: list[dict[str, Any]] = []  # JSON lines, or a table's rows
    for name, ref in refs.items():
        counts: dict[str, int] = {}
        for e in ref.entries:
            counts[e.precision] = counts.get(e.precision, 0) + 1
        device = ref.specs.get("GPU Model") or ref.specs.get("CPU Model") or ref.specs.get("CPU", "")
        rows.append(
            {
                "name": name,
                "processor": ref.processor,
                "device": device,
                "set": ref.set,
                "kernels": counts,
                "source": ref.source,
            }
        )
    if args.format == "json":
        for r in rows:
            print(json.dumps(r))
        return 0
    print_tables(make_console(), [reference_table(rows)], how_to_see="--format json")
    return 0


def reference_table(rows: list[dict[str, Any]]) -> Table:
    """The references as a table drawn by the reports' fit-or-fold rule: the name that --reference
    takes is never cut (the source file is the first column a narrow terminal leaves out)."""
    return Table(
        "references",
        f"{len(rows)} references (DeepBench's published results)",
        ["name", "device", "kernels per precision", "source"],
        [[r["name"], r["device"], ", ".join(f"{n} {p}" for p, n in r["kernels"].items()), r["source"]] for r in rows],
        ("source",),
        ("device", "kernels per precision"),
    )
