"""Reports, comparisons, references and fastest-per-kernel tables (issue 7).

Every format is produced for a real smoke run and for committed results (the shipped
references, and runner/published/ where present); the HTML is opened in headless Chromium;
the comparison's verdicts are checked on synthetic runs with known differences and noise."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from plotly.offline import get_plotlyjs

from deepbench.kernels.catalog import by_id, catalog
from deepbench.runner.analysis.compare import compare
from deepbench.runner.analysis.references import find_reference, references
from deepbench.runner.analysis.sources import load_run, load_source
from deepbench.runner.render.html import TRACES_IN_BUNDLE, bundle_version, plotly_bundle
from deepbench.runner.render.report_render import write_report
from deepbench.runner.render.tables import fmt_us

from .conftest import REPO, run_cli
from .reports_synthetic import noisy, result, write_run

PUBLISHED = REPO / "runner" / "published"
FORMATS = ("table", "md", "csv", "xlsx", "html")


def _committed() -> list[str]:
    # a run folder has run.json (per-rank records of a multi-process run live under its ranks/)
    runs = (
        sorted(str(p.parent) for p in PUBLISHED.rglob("run.json") if p.parent.parent.name != "ranks")
        if PUBLISHED.exists()
        else []
    )
    return [*runs, "train/V100"]  # a shipped reference: committed results in a workbook's layout


def _check_format(src_label_count: int, fmt: str, path: Path, stdout: str) -> None:
    if fmt == "xlsx":
        import openpyxl

        wb = openpyxl.load_workbook(path)
        assert wb.sheetnames[-1] == "Specs" and all(s.startswith("Results ") for s in wb.sheetnames[:-1])
        # A data row: no section title in column A, and kernel parameters from column C on (layer
        # kernels have text parameters, e.g. kind=layer); the roofline note has nothing past column B.
        data_rows = sum(
            1
            for ws in wb.worksheets[:-1]
            for row in ws.iter_rows(values_only=True)
            if row[0] is None and len(row) > 2 and any(v is not None for v in row[2:])
        )
        assert data_rows == src_label_count
    elif fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(path.read_text())))
        assert len(rows) == src_label_count and {"operation", "prec", "median (us)", "bound", "% peak"} <= set(rows[0])
    elif fmt == "md":
        text = path.read_text()
        assert text.startswith("# DeepBench report") and "## Specs" in text
        assert text.count("\n| ") >= src_label_count
    elif fmt == "html":
        text = path.read_text()
        assert text.startswith("<!DOCTYPE html>") and 'class="sortable"' in text and 'id="toc"' in text
        bundle = plotly_bundle()
        assert text.count(bundle) == 1  # plotly's basic bundle embedded once; besides it nothing is fetched:
        rest = text.replace(bundle, "")
        assert trace_types(rest) <= TRACES_IN_BUNDLE  # every trace drawn is in the basic bundle
        assert "Plotly.newPlot" in rest and 'id="summary"' in rest
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)|url\(\s*["']?https?:|@import""", rest)
    else:
        assert "median (us)" in path.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_report_every_format_for_the_smoke_run(smoke_run: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"report.{fmt}"
    p = run_cli("deepbench", "report", str(smoke_run), "--format", fmt, "--out", str(out))
    assert p.returncode == 0, p.stderr
    _check_format(len(load_run(smoke_run).entries), fmt, out, p.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("source", _committed(), ids=lambda s: s.replace(str(REPO) + "/", ""))
def test_report_every_format_for_committed_results(source: str, tmp_path: Path) -> None:
    loaded = load_source(source)
    for fmt in FORMATS:  # in this process (the command line itself is tested on the smoke run)
        out = tmp_path / f"report.{fmt}"
        assert write_report(loaded, fmt, out) == str(out)
        _check_format(len(loaded.entries), fmt, out, "")
    p = run_cli("deepbench", "report", source, "--format", "md")
    assert p.returncode == 0 and p.stdout.startswith("# DeepBench report"), p.stderr


def test_report_to_stdout_in_text_formats(smoke_run: Path) -> None:
    p = run_cli("deepbench", "report", str(smoke_run))
    assert p.returncode == 0 and "Dense matrix multiplication" in p.stdout
    # a CPU run measures its ceilings too (a GEMM with the run's threads, a copy): % of peak is there
    assert "no measured ceilings" not in p.stdout and "% peak" in p.stdout


def test_roofline_columns_from_measured_ceilings(tmp_path: Path) -> None:
    """With ceilings, the bound is the larger of FLOPs/peak and bytes/bandwidth, and % of peak
    is that bound over the median."""
    k = by_id()["gemm/train/004"]  # 1760 x 7000 x 1760: compute bound at any sane ratio
    r = result(k, "fp32", lambda d: [1000.0] * 5)
    run = write_run(tmp_path / "run", [r], ceilings={"tflops_fp32": 100.0, "gbps_copy": 1000.0})
    rows = list(csv.DictReader(io.StringIO(run_cli("deepbench", "report", str(run), "--format", "csv").stdout)))
    expected = 100 * k.flops() / 100e12 / 1000e-6
    assert rows[0]["bound"] == "compute" and rows[0]["% peak"] == f"{expected:.0f}%"
    html = tmp_path / "r.html"
    assert run_cli("deepbench", "report", str(run), "--format", "html", "--out", str(html)).returncode == 0
    # the measured ceilings drawn in the chart (plotly's JSON writes "/" as \u002f)
    assert "fp32 roof: 100 TFLOP/s, 1,000 GB/s" in html.read_text().replace("\\u002f", "/")


# ----- references -----------------------------------------------------------------------------
KNOWN = [  # (reference, kernel id, precision, direction, ms) read off the workbooks by hand
    ("V100", "gemm/train/000", "fp32", "fwd", 0.038),  # 1760x16x1760 NN
    ("V100", "gemm/train/000", "fp16", "fwd", 0.020),
    ("MI25", "conv/train/000", "fp32", "bwd_data", 0.296),  # AMD layout: R before S, pad_h before pad_w
    ("V100", "rnn/train/000", "fp32", "bwd", 2.881 + 0.588),  # backward wrt inputs + wrt weights
    ("server/1080Ti", "gemm/inference_server/000", "int8", "fwd", 0.46),
]


@pytest.mark.parametrize("name,kid,prec,direction,ms", KNOWN)
def test_references_hold_known_published_figures(name: str, kid: str, prec: str, direction: str, ms: float) -> None:
    ref = find_reference(name)
    hits = [e for e in ref.entries if e.kernel_id == kid and e.precision == prec]
    assert len(hits) == 1 and hits[0].times_ms[direction] == pytest.approx(ms)


def test_reference_conversion_is_reproducible(deepbench_data: Path, tmp_path: Path) -> None:
    """The shipped package data is exactly what the maintainer tool makes from DeepBench's workbooks
    (tests/fixtures/deepbench)."""
    tool = REPO / "tests" / "tools" / "import_references.py"
    p = subprocess.run([sys.executable, str(tool), str(deepbench_data), str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    shipped = REPO / "runner" / "data" / "references"
    made = sorted(f.name for f in tmp_path.glob("*.json.gz"))
    assert made == sorted(f.name for f in shipped.glob("*.json.gz")) and len(made) == len(references())
    for name in made:
        assert (tmp_path / name).read_bytes() == (shipped / name).read_bytes(), name


def test_references_command_lists_them() -> None:
    p = run_cli("deepbench", "references", "--format", "json")
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    assert p.returncode == 0 and {r["name"] for r in rows} == set(references())
    assert any(r["name"] == "train/V100" and r["kernels"]["fp32"] > 250 for r in rows)


def test_ambiguous_and_unknown_reference_names() -> None:
    assert find_reference("T4", prefer_set="train").name == "train/T4"
    p = run_cli("deepbench", "report", "T4")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    p = run_cli("deepbench", "compare", "train/V100", "--reference", "NoSuchGPU")
    assert p.returncode == 2 and "NoSuchGPU" in p.stderr and len(p.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def train_run(tmp_path_factory) -> Path:
    """A train-like run: every training kernel of the catalog in fp32 and fp16, synthetic times."""
    rng = np.random.default_rng(7)
    results = [
        result(k, prec, noisy(k, 1.0, 0.02, 5, rng)) for k in catalog() if k.set == "train" for prec in ("fp32", "fp16")
    ]
    return write_run(tmp_path_factory.mktemp("train") / "train-run", results)


@pytest.mark.slow
def test_compare_with_v100_lines_up_every_training_kernel(train_run: Path) -> None:
    ref = find_reference("V100")
    p = run_cli("deepbench", "compare", str(train_run), "--reference", "V100", "--format", "csv")
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    wanted = [e for e in ref.entries if e.kernel.set == "train"]
    assert len(wanted) > 500
    for e in wanted:  # every published training row lines up, with the published time
        params = {f: ("T" if v else "N") if isinstance(v, bool) else str(v) for f, v in e.kernel.params().items()}
        hits = [
            r
            for r in rows
            if r["operation"] == e.kernel.op and r["prec"] == e.precision and all(r[f] == v for f, v in params.items())
        ]
        assert hits and all(r["DeepBench V100 (us)"] == fmt_us(e.total_ms * 1e3) for r in hits), (e.kernel_id, hits)
    matched = {
        (r["operation"], r["prec"], tuple(r[f] for f in ("m", "n", "k", "a_t", "b_t"))): r
        for r in rows
        if r["DeepBench V100 (us)"] and r["operation"] == "gemm"
    }
    nn = matched[("gemm", "fp32", ("1760", "16", "1760", "N", "N"))]
    assert nn["DeepBench V100 (us)"] == "38.0" and nn["DeepBench V100 prec"] == "fp32 (Float)"
    fp16 = matched[("gemm", "fp16", ("1760", "16", "1760", "N", "N"))]
    assert fp16["DeepBench V100 (us)"] == "20.0" and "16 bit inputs" in fp16["DeepBench V100 prec"]
    # the reference is the baseline, said in words, and the run's kernels it lacks are named
    md = run_cli("deepbench", "compare", str(train_run), "--reference", "V100", "--format", "md").stdout
    assert md.split("\n\n")[1].startswith("baseline: DeepBench V100 (reference)")
    assert re.search(r"\*\*train-run vs DeepBench V100: [\d.,]+x (faster|slower) \(geometric mean over \d+", md)
    lacking = re.search(r"## Kernels only train-run has \((\d+)\)", md)
    assert lacking and int(lacking.group(1)) > 0 and all(r["note"] != "missing" for r in rows)


def trace_types(page: str) -> set[str]:
    """The trace types of every chart on a page: the data array of each Plotly.newPlot call."""
    decoder = json.JSONDecoder()
    types = set()
    for m in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', page):
        data, _ = decoder.raw_decode(page, m.end())
        types |= {trace.get("type", "scatter") for trace in data}
    assert types, "no chart found"
    return types


def test_the_basic_bundle_is_the_installed_plotly_version() -> None:
    """The embedded partial bundle draws what plotly's Python side writes: the same plotly.js version,
    and a quarter of the full bundle's size."""
    basic, full = plotly_bundle(), get_plotlyjs()
    assert bundle_version(basic) and bundle_version(basic) == bundle_version(full)
    assert len(basic) < len(full) / 3


# ----- verdicts on synthetic runs with known differences and noise ---------------------------
CASES = [  # (factor, relative noise, samples, verdict)
    (1.5, 0.02, 30, "slower"),
    (0.6, 0.02, 30, "faster"),
    (1.0, 0.01, 30, "same"),
    (1.10, 0.40, 5, "unclear"),  # a real 10% difference drowned in 40% noise
    (1.03, 0.002, 30, "same"),  # a real difference below the 5% threshold
    (2.0, 0.01, 2, "unclear"),  # too few samples to know the noise
]


@pytest.mark.parametrize("factor,noise,n,expected", CASES)
def test_verdicts_on_synthetic_runs(tmp_path: Path, factor: float, noise: float, n: int, expected: str) -> None:
    rng = np.random.default_rng(int(factor * 1000) + n)
    kernels = [by_id()[i] for i in ("gemm/train/000", "conv/train/010", "rnn/train/003")]
    a = write_run(tmp_path / "a", [result(k, "fp32", noisy(k, 1.0, noise, n, rng)) for k in kernels])
    b = write_run(tmp_path / "b", [result(k, "fp32", noisy(k, factor, noise, n, rng)) for k in kernels])
    cmp = compare([load_run(a), load_run(b)])
    verdicts = [r.ratios[0].verdict for r in cmp.rows]
    assert verdicts == [expected] * len(kernels)
    if n >= 5 and noise <= 0.02:
        gm = next(s for s in cmp.summary() if s["op"] == "all")["geomean"]
        assert gm == pytest.approx(factor, rel=0.03)


def test_compare_reports_kernels_in_one_run_only(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    k1, k2, k3 = (by_id()[i] for i in ("gemm/train/000", "gemm/train/001", "gemm/train/002"))
    a = write_run(tmp_path / "a", [result(k, "fp32", noisy(k, 1, 0.01, 10, rng)) for k in (k1, k2)])
    b = write_run(tmp_path / "b", [result(k, "fp32", noisy(k, 1, 0.01, 10, rng)) for k in (k2, k3)])
    cmp = compare([load_run(a), load_run(b)])
    assert [e.kernel.id for e in cmp.only_base[0]] == [k1.id] and [e.kernel.id for e in cmp.only_other[0]] == [k3.id]
    for fmt in ("table", "md", "csv", "html"):
        out = tmp_path / f"cmp.{fmt}"
        p = run_cli("deepbench", "compare", str(a), str(b), "--format", fmt, "--out", str(out))
        assert p.returncode == 0, p.stderr
        text = out.read_text()
        assert k2.label().split()[0].split("=")[1] in text
        if fmt != "csv":
            assert "only" in text and "geomean" in text.lower()


def test_fastest_per_kernel_across_runs_and_a_reference(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    ks = [by_id()[f"gemm/train/{i:03d}"] for i in range(5)]
    a = write_run(tmp_path / "slow", [result(k, "fp32", noisy(k, 3.0, 0.01, 5, rng)) for k in ks], run_id="slow")
    b = write_run(tmp_path / "fast", [result(k, "fp32", noisy(k, 1.0, 0.01, 5, rng)) for k in ks], run_id="fast")
    p = run_cli("deepbench", "fastest", str(a), str(b), "--reference", "V100", "--format", "csv")
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    fastest = {r["m"] + "x" + r["n"]: r["fastest"] for r in rows if r["prec"] == "fp32"}
    v100 = {e.kernel.label(): e.total_ms * 1e3 for e in find_reference("V100").entries if e.precision == "fp32"}
    for k in ks:
        times = {"fast": None, "DeepBench V100": v100[k.label()]}
        r = next(r for r in rows if r["m"] == str(k.m) and r["n"] == str(k.n) and r["a_t"] == "N")
        times["fast"] = float(r["fast (us)"].replace(",", ""))
        assert r["fastest"] == min(times, key=times.get)
        assert r["fastest"] != "slow"
    assert fastest
    for fmt in ("table", "md", "html"):
        out = tmp_path / f"fastest.{fmt}"
        assert run_cli("deepbench", "fastest", str(a), str(b), "--format", fmt, "--out", str(out)).returncode == 0
        assert "fast" in out.read_text()


# ----- errors: one line, exit 2 ---------------------------------------------------------------
def test_errors_are_one_line_and_exit_2(tmp_path: Path, smoke_run: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    lines = (smoke_run / "results.jsonl").read_text().splitlines()
    (bad / "results.jsonl").write_text(lines[0] + "\n{not json\n" + lines[1] + "\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    for args in (
        ["report", str(tmp_path / "missing")],
        ["report", str(bad)],
        ["report", str(empty)],
        ["compare", str(smoke_run)],
        ["compare", str(smoke_run), str(tmp_path / "missing")],
        ["compare", str(smoke_run), str(smoke_run), "--threshold", "3"],
        ["fastest"],
        ["report", str(smoke_run), "--format", "pdf"],
    ):
        p = run_cli("deepbench", *args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, (args, p.stderr)
