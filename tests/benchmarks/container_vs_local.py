"""Does the container change what is measured? The same kernels, on the same CPU, in one run:
`deepbench-run --local` and `deepbench-run --platform intel` (in the image) alternately, several
rounds, then per-kernel ratios (the median over rounds of each round's container / local), their
median (goal 0.97-1.03), and the container's start-up overhead (goal under 5 s with the image
present): the time to start a container with the runner's options and import the harness in it,
minus the same import in a local subprocess.

  python tests/benchmarks/container_vs_local.py --image deepbench/intel:0.1.0 [--suite smoke]
      [--rounds 2] [--threads 1] [--starts 5] [--keep DIR]

Alternating rounds spread slow drifts of a shared machine over both sides; --threads 1 keeps the
two from depending on how many cores other work leaves free."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from deepbench.kernels.results import Status
from deepbench.kernels.results_file import read_results
from deepbench.runner.launch.images.container import run_options
from deepbench.runner.launch.images.docker_client import connect
from deepbench.runner.platforms import get_platform

GOAL_RATIO = (0.97, 1.03)
GOAL_START_S = 5.0
IMPORT = "import deepbench.kernels.harness, deepbench.kernels.backends.pytorch"


def run_suite(args: argparse.Namespace, out: Path, local: bool) -> dict[str, float]:
    where = ["--local", "--platform", "intel"] if local else ["--platform", "intel", "--image", args.image]
    cmd = [
        "deepbench-run",
        *where,
        "--suite",
        args.suite,
        "--threads",
        str(args.threads),
        "--quiet",
        "--out",
        str(out),
    ] + (["--ops", args.ops] if args.ops else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return {
        r.id: r.time_us.median
        for r in read_results(out / "results.jsonl")
        if r.status is Status.OK and r.time_us is not None
    }


def start_overhead(image: str, starts: int, workdir: Path) -> tuple[float, float]:
    """Median seconds: a container with the runner's options importing the harness; the same locally."""
    client = connect()
    image_id = client.images.get(image).id
    plan = workdir / "plan.json"
    plan.write_text("{}\n")
    opts = run_options(get_platform("intel"), image_id, plan, workdir)
    opts.update(entrypoint=["/opt/deepbench/bin/python", "-c", IMPORT], command=[], detach=False, remove=True)
    container, local = [], []
    for _ in range(starts):
        t = time.perf_counter()
        client.containers.run(**opts)
        container.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", IMPORT], check=True)
        local.append(time.perf_counter() - t)
    return statistics.median(container), statistics.median(local)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--image", required=True, help="the Intel/CPU image to compare (present locally)")
    p.add_argument("--suite", default="smoke")
    p.add_argument("--ops", help="only these operations")
    p.add_argument("--rounds", type=int, default=2, help="alternating local/container rounds (default 2)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--starts", type=int, default=5, help="container starts timed (default 5)")
    p.add_argument("--keep", type=Path, help="keep the results folders here")
    args = p.parse_args()

    root = args.keep or Path(tempfile.mkdtemp(prefix="deepbench-cvl-"))
    root.mkdir(parents=True, exist_ok=True)
    times: dict[str, dict[str, list[float]]] = {"local": defaultdict(list), "container": defaultdict(list)}
    for r in range(args.rounds):
        for side in ("local", "container") if r % 2 == 0 else ("container", "local"):
            got = run_suite(args, root / f"{side}-{r}", local=side == "local")
            for kid, us in got.items():
                times[side][kid].append(us)
            print(f"round {r + 1}/{args.rounds} {side}: {len(got)} kernels ok", flush=True)

    both = [k for k in times["local"] if k in times["container"]]
    print(
        f"\n{'kernel':44} {'local us':>12} {'container us':>13} {'ratio':>7}  (medians over rounds; ratio: median "
        f"of the rounds' container/local)"
    )
    ratios = []
    for kid in both:
        loc = statistics.median(times["local"][kid])
        con = statistics.median(times["container"][kid])
        # Pairs from the same round (run back to back) cancel drifts slower than a round.
        paired = [c / lo for c, lo in zip(times["container"][kid], times["local"][kid], strict=False)]
        ratios.append(statistics.median(paired))
        print(f"{kid:44} {loc:12.1f} {con:13.1f} {ratios[-1]:7.3f}")
    med = statistics.median(ratios)
    geo = statistics.geometric_mean(ratios)
    print(
        f"\n{len(ratios)} kernels, {args.rounds} rounds, --threads {args.threads}: median ratio container/local "
        f"{med:.3f} (goal {GOAL_RATIO[0]}-{GOAL_RATIO[1]}: "
        f"{'met' if GOAL_RATIO[0] <= med <= GOAL_RATIO[1] else 'NOT met'}), "
        f"geometric mean {geo:.3f}, range {min(ratios):.3f}-{max(ratios):.3f}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        con_s, loc_s = start_overhead(args.image, args.starts, Path(tmp))
    over = con_s - loc_s
    print(
        f"start-up: container {con_s:.2f} s, local subprocess {loc_s:.2f} s (median of {args.starts}, harness "
        f"import included): overhead {over:.2f} s (goal < {GOAL_START_S:g} s: "
        f"{'met' if over < GOAL_START_S else 'NOT met'})"
    )
    print(f"cpu: {os.cpu_count()} cores visible; load average {os.getloadavg()[0]:.2f}; results in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
