"""Every engine configuration cuDNN can build for a few convolution directions, timed and checked, beside
the one the harness's search picks (kernels/backends/cudnn/search.py, engine_choice.py).

The harness's race stops at a per-direction time budget; this listing tries every configuration the
search enumerates (heuristics modes A, B and FALLBACK, every engine with its default knobs, then a sample
of each engine's knob grid: --grid-per-engine) for up to --seconds per direction, so that one can see
whether the budget hid a faster correct engine. For each configuration: engine id, knobs, cuDNN's plan
name, the engine's family notes, workspace, built or why not, a quick time (the race's own timer) and
the check's verdict. Engines cuDNN compiles at run time are listed, not built (seconds each).

Run from the repository root with the package installed (a GPU, cuDNN and cudnn-frontend):

    python3 tests/benchmarks/conv_engines.py --out /tmp/conv_engines.json
    python3 tests/benchmarks/conv_engines.py --case conv/train/026:fp32:fwd --seconds 90 --out x.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_CASES = ("conv/train/026:fp32:fwd", "conv/train/055:fp16:bwd_filter")
DEFAULT_SECONDS = 50.0  # per direction: two directions and the harness's own races fit in ~3 minutes
DEFAULT_GRID = 8  # knob-grid configurations listed per engine (the race itself has no such cap)


def _case(text: str) -> tuple[str, str, str]:
    parts = text.split(":")
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(
            f"'{text}': expected KERNEL_ID:PRECISION:DIRECTION, e.g. conv/train/026:fp32:fwd"
        )
    kernel, precision, direction = parts
    return kernel, precision, direction


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--case",
        action="append",
        type=_case,
        help=f"KERNEL_ID:PRECISION:DIRECTION (repeatable; default {' '.join(DEFAULT_CASES)})",
    )
    p.add_argument(
        "--seconds", type=float, default=DEFAULT_SECONDS, help="listing time per direction (default %(default)s)"
    )
    p.add_argument(
        "--grid-per-engine",
        type=int,
        default=DEFAULT_GRID,
        help="knob-grid configurations per engine (default %(default)s)",
    )
    p.add_argument("--out", type=Path, required=True, help="JSON file written")
    args = p.parse_args(argv)
    cases = args.case or [_case(c) for c in DEFAULT_CASES]

    from deepbench.kernels.backends.cudnn import conv
    from deepbench.kernels.backends.cudnn.backend import CudnnBackend
    from deepbench.kernels.backends.cudnn.declaration import CUDNN
    from deepbench.kernels.catalog import by_id
    from deepbench.kernels.precision import Precision
    from deepbench.kernels.results import Settings

    kernels = by_id()
    for kid, prec, direction in cases:
        if kid not in kernels or kernels[kid].op != "conv":
            p.error(f"'{kid}' is not a convolution of the catalog")
        if prec not in {x.value for x in Precision}:
            p.error(f"unknown precision '{prec}'")
        if direction not in conv.OUTPUT_ROLE:
            p.error(f"unknown direction '{direction}' (one of {', '.join(conv.OUTPUT_ROLE)})")
    settings = Settings(device="cuda", kernel_time=False, backend_options={CUDNN.name: {"engine_race": "inline"}})
    backend = CudnnBackend(settings)
    if backend.lib is None:
        print(f"conv_engines: the cudnn backend cannot run here: {backend.missing}", file=sys.stderr)
        return 1
    import torch

    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "cudnn_backend": str(backend.lib.backend_version()),
        "cudnn_frontend": str(getattr(backend.lib, "__version__", "")),
        "seconds_per_direction": args.seconds,
        "grid_per_engine": args.grid_per_engine,
        "directions": [],
    }
    by_kernel: dict[tuple[str, str], list[str]] = {}
    for kid, prec, direction in cases:
        by_kernel.setdefault((kid, prec), []).append(direction)
    for (kid, prec), directions in by_kernel.items():
        races: list[conv.Race] = []
        started = time.monotonic()
        prepared = conv.prepare(backend, kernels[kid], Precision(prec), listing=races)
        harness_s = time.monotonic() - started
        for part, race in zip(prepared.parts, races, strict=True):
            if part.direction not in directions:
                continue
            entry = _listing(race, part.info["cudnn"], args.seconds, args.grid_per_engine)
            entry.update(kernel=kid, precision=prec, direction=part.direction, harness_prepare_s=harness_s)
            report["directions"].append(entry)
            _print(entry)
        backend.release()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=str))
    print(f"wrote {args.out}")
    return 0


def _listing(race: Any, harness: dict[str, Any], seconds: float, grid: int) -> dict[str, Any]:
    """Every configuration of the direction (a fresh search without the race's budget, `seconds` at most)."""
    from deepbench.kernels.backends.cudnn import engine_choice as engines

    log: list[dict[str, Any]] = []
    budget = engines.Budget(seconds)
    found = race.search(False, budget, grid_cap=grid, log=log)
    fastest = math.inf
    for e in found.candidates():
        row = log[-1]
        try:  # as the race times them: far slower than the fastest so far keeps its eager figure
            row["quick_us"] = race.timed(e, fastest * engines.OUT_OF_CONTEST)
            fastest = min(fastest, row["quick_us"])
        except Exception as exc:  # noqa: BLE001 - listed with why
            row.update(status="rejected", reason=f"did not run: {type(exc).__name__}: {exc}"[:300])
            continue
        check = race.check_engine(e)
        row["check"] = {"passed": check.passed, "error": check.error, "tolerance": check.tolerance}
        row["status"] = "passed" if check.passed else "rejected"
        if not check.passed:
            row["reason"] = "check failed"
        row["harness_pick"] = row.get("plan_name") == harness.get("plan_name")
    census = found.finish([r for r in log if "status" in r])
    families: dict[int, dict[str, Any]] = {}  # notes belong to the engine: one probe per engine id
    for row in log:
        eid = row["engine_id"]
        if eid not in families:
            families[eid] = race.family(engines.Engine(index=-1, engine_id=eid, knobs=row["knobs"]))
        row.update(families[eid])
    correct = [r for r in log if r.get("check", {}).get("passed")]
    fastest_correct = min(correct, key=lambda r: r["quick_us"], default=None)
    return {
        "harness": {
            k: harness.get(k)
            for k in ("plan_name", "engine", "family", "numerical_notes", "fastest_correct_us", "search", "chosen_by")
        },
        "fastest_correct_listed": fastest_correct,
        # the harness's chosen plan (its race's figure) over the fastest correct configuration listed here
        "harness_over_fastest_listed": (harness.get("fastest_correct_us") or math.nan)
        / (fastest_correct["quick_us"] if fastest_correct else math.nan),
        "listing_census": census,
        "configurations": log,
    }


def _print(entry: dict[str, Any]) -> None:
    h = entry["harness"]
    print(
        f"\n== {entry['kernel']} {entry['precision']} {entry['direction']}: harness picks {h['plan_name']} "
        f"({h.get('family')}, {h.get('fastest_correct_us')} us); its search: {h.get('search')}"
    )
    f = entry["fastest_correct_listed"]
    if f:
        print(
            f"   fastest correct listed: {f.get('plan_name')} {f.get('quick_us'):.1f} us ({f.get('family')}); "
            f"harness / it: {entry['harness_over_fastest_listed']:.2f}"
        )
    print(f"   listing census: {entry['listing_census']}")
    for r in entry["configurations"]:
        t = r.get("quick_us")
        ck = r.get("check", {})
        verdict = "" if not ck else ("ok" if ck["passed"] else f"WRONG {ck['error']}")
        print(
            f"   {r['source'][:5]:5} eng{r['engine_id']:<4} {r.get('plan_name', '-'):40.40} {r['outcome']:17} "
            f"{'' if t is None else f'{t:10.1f} us'} {verdict} {r.get('family', '')}"
            f"{' <- harness' if r.get('harness_pick') else ''}"
        )


if __name__ == "__main__":
    sys.exit(main())
