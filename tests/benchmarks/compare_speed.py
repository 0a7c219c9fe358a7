"""How long `deepbench compare` takes on the published H100 and H200 train runs (issue 45: under
5 s on a 2-core machine). Prints the wall time of the whole command (loading, bootstrap, tables)
and of the comparison alone.

    PYTHONPATH=$PWD/.pyroot python tests/benchmarks/compare_speed.py [RUN_A RUN_B]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time
from pathlib import Path

from deepbench.runner.analysis.compare import compare
from deepbench.runner.analysis.sources import load_source
from deepbench.runner.cli import main

PUBLISHED = Path(__file__).resolve().parents[2] / "runner" / "published"


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "runs",
        nargs="*",
        default=[f"H100={PUBLISHED / 'nvidia-h100' / 'train'}", f"H200={PUBLISHED / 'nvidia-h200' / 'train'}"],
    )
    args = parser.parse_args()
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        status = main(["compare", *args.runs])
    whole = time.perf_counter() - start
    sources = [load_source(r) for r in args.runs]
    start = time.perf_counter()
    cmp = compare(sources)
    alone = time.perf_counter() - start
    print(
        f"deepbench compare {' '.join(args.runs)}: exit {status}, {whole:.2f} s in all; "
        f"the comparison of {len(cmp.rows)} kernels alone {alone:.2f} s"
    )


if __name__ == "__main__":
    main_bench()
