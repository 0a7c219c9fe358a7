"""Flagged results said where a run leaves the user's hands (issue 45): `submit` prints how many
results are noisy, unconverged or throttled, and `check --strict` refuses a bundle with any."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
from rich.console import Console

from deepbench.kernels.catalog import by_id
from deepbench.runner.analysis.flagged import flagged, flagged_line
from deepbench.runner.analysis.sources import read_run_folder
from deepbench.runner.commands.check import flags_pass
from deepbench.runner.submission import layout

from .conftest import run_cli
from .reports_synthetic import noisy, result, write_run


def _results(flags: list[tuple[str, ...]]):
    rng = np.random.default_rng(0)
    ks = [by_id()[f"gemm/train/{i:03d}"] for i in range(len(flags))]
    return [
        result(k, "fp32", noisy(k, 1.0, 0.01, 5, rng)).model_copy(update={"flags": f})
        for k, f in zip(ks, flags, strict=True)
    ]


def test_counts_and_line() -> None:
    rs = _results([("noisy",), ("noisy", "unconverged"), (), ("throttled",)])
    assert {f: len(v) for f, v in flagged(rs).items()} == {
        "noisy": 2,
        "unconverged": 1,
        "throttled": 1,
        "contended": 0,
        "clock-fell": 0,
    }
    assert (
        flagged_line(rs) == "3 of 4 ok results are flagged, their times less certain: 2 noisy, 1 unconverged, "
        "1 throttled"
    )
    assert flagged_line(_results([(), ()])) == (
        "none of the 2 ok results is flagged (noisy, unconverged, throttled, contended, clock-fell)"
    )


def test_check_strict_refuses_flagged_results(tmp_path: Path) -> None:
    bundle = write_run(tmp_path / "bundle", _results([("noisy", "unconverged"), ()]))
    assert (bundle / layout.RESULTS).exists()
    for strict, passes in ((False, True), (True, False)):
        buf = io.StringIO()
        assert flags_pass(Console(file=buf, width=200), bundle, strict) is passes
        assert ("problem (--strict): " in buf.getvalue()) is not passes and "1 of 2 ok results" in buf.getvalue()
    clean = write_run(tmp_path / "clean", _results([(), ()]))
    assert flags_pass(Console(file=io.StringIO()), clean, True)


def test_submit_prints_the_count(smoke_run: Path, tmp_path: Path) -> None:
    p = run_cli(
        "deepbench",
        "submit",
        str(smoke_run),
        "--out",
        str(tmp_path / "b"),
        "--submitter",
        "test",
        env={"COLUMNS": "400"},
    )
    assert "Traceback" not in p.stderr, p.stderr
    results = read_run_folder(smoke_run)[0]
    assert flagged_line(results) in p.stdout
    m = re.search(r"(\d+) of (\d+) ok results are flagged|none of the (\d+) ok results", p.stdout)
    assert m
