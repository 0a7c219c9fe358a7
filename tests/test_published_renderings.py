"""The published runs render as they did before the backends were re-laid out (issue 54: "the published runs
load, report and compare byte-for-byte as before"): every published run's Markdown and CSV report and its
terminal tables at 80 columns, and four comparisons, each held to the SHA-256 of its rendering by the tool as
it was at commit efa013c (tests/fixtures/published-renderings/sha256.json). A change of what a report shows
is a change of the tool: regenerate the digests on purpose (the failure says how) and say why. Renewed since:
nvidia-h200/train's three and compare-train.md, when that run was re-published (2026-12-01, issue 56); the
comparisons' when compare named what differs between runs and left one-rank collectives out of its geomeans (issue
58: the two GPU comparisons now need --allow-unlike, the H100's convolutions being NCHW throughout); the 80-column
tables and the comparisons' when a newcomer's terminal was fitted (issue 58: footnotes and warnings wrapped under their
label, a folded row's values justified as their own columns, compare's summary without its geomean ratio at 80
columns); the Markdown reports' when the kernels closest to and furthest from the roof became those at or under it
(issue 58: "closest 246%" was a kernel past its ceiling); the two GPU comparisons' when a spec one run did not
record read "unrecorded" instead of claiming the run older than the option (2026-12-02)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from deepbench.runner.cli import main

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "runner" / "published"
DIGESTS = Path(__file__).parent / "fixtures" / "published-renderings" / "sha256.json"
COLUMNS = "80"
COMPARISONS = {
    "compare-train.md": [
        "H100=runner/published/nvidia-h100/train",
        "H200=runner/published/nvidia-h200/train",
        "--format",
        "md",
        "--allow-unlike",
    ],
    "compare-server.md": [
        "H100=runner/published/nvidia-h100/inference-server",
        "H200=runner/published/nvidia-h200/inference-server",
        "--format",
        "md",
        "--allow-unlike",
    ],
    "compare-v100.table": ["runner/published/nvidia-h100/train", "--reference", "V100"],
    "compare-allreduce.md": [
        "X2=runner/published/nvidia-h200x2/all_reduce",
        "X4=runner/published/nvidia-h200x4/all_reduce",
        "--format",
        "md",
    ],
}
WIDTHS = {"compare-v100.table": "100"}


def renderings() -> dict[str, list[str]]:
    """File name -> the `deepbench` arguments that render it (paths relative to the repository)."""
    out: dict[str, list[str]] = {}
    for plan in sorted(PUBLISHED.rglob("plan.json")):
        run = plan.parent.relative_to(REPO).as_posix()
        name = plan.parent.relative_to(PUBLISHED).as_posix().replace("/", "__")
        out[f"{name}.md"] = ["report", run, "--format", "md"]
        out[f"{name}.csv"] = ["report", run, "--format", "csv"]
        out[f"{name}.table80"] = ["report", run]
    out.update({name: ["compare", *args] for name, args in COMPARISONS.items()})
    return out


def test_every_published_run_has_its_digest() -> None:
    assert set(renderings()) == set(json.loads(DIGESTS.read_text()))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(renderings()))
def test_a_published_run_renders_as_before(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("COLUMNS", WIDTHS.get(name, COLUMNS))
    main(renderings()[name])
    captured = capsys.readouterr()
    text = captured.out + captured.err
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert digest == json.loads(DIGESTS.read_text())[name], (
        f"deepbench {' '.join(renderings()[name])} renders otherwise than before; if that is meant, write the new "
        f"digest into {DIGESTS.relative_to(REPO)} and say why. It now begins:\n{text[:1500]}"
    )
