"""`deepbench verify` and noise (issue 21, case 8): a kernel too noisy for its tolerance to mean
anything is `unverifiable`, never `agree` (a 50% alteration of a noisy kernel used to pass); kernels
that did not agree or were noisy are measured again with longer samples, and the quieter re-run
is judged; the rule's numbers are checked at the door."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from deepbench.kernels.results import Status, TimeStats
from deepbench.runner.submission.verify import (
    DEFAULT_MAX_NOISE,
    REMEASURE_FACTOR,
    ToleranceRule,
    compare,
    judge,
    longer,
)

from .conftest import run_cli


def result(kid: str, median: float, rel_iqr: float, status: str = "ok") -> SimpleNamespace:
    """What verify reads of a result: id, status, reason and the kernel's time statistics."""
    if status != "ok":
        return SimpleNamespace(id=kid, status=Status(status), reason="why", time_us=None, flags=())
    half = median * rel_iqr / 2
    stats = TimeStats(
        median=median, min=median - half, max=median + half, mean=median, p25=median - half, p75=median + half, n=20
    )
    return SimpleNamespace(id=kid, status=Status.OK, reason="", time_us=stats, flags=())


DEFAULT = ToleranceRule()


def test_a_noisy_kernel_altered_by_half_is_unverifiable_not_agreed() -> None:
    """Relative IQR 40% in both runs: its tolerance would reach the 100% cap, so numbers 50% lower
    would agree; they are unverifiable instead, and the reason says why."""
    (c,) = compare([result("k", 50.0, 0.40)], [result("k", 100.0, 0.40)], DEFAULT)
    assert c.verdict == "unverifiable" and "too noisy to verify" in c.reason and c.noise == pytest.approx(0.566, 1e-3)
    (c,) = compare([result("k", 50.0, 0.02)], [result("k", 100.0, 0.02)], DEFAULT)
    assert c.verdict == "disagree"  # the same alteration on a quiet kernel is caught
    (c,) = compare([result("k", 100.0, 0.05)], [result("k", 103.0, 0.05)], DEFAULT)
    assert c.verdict == "agree"


def test_the_noise_limit_bounds_every_agreeing_tolerance() -> None:
    """With the defaults no agreeing kernel rests on a tolerance over noise_factor x max_noise (45%)."""
    for rel in (0.0, 0.05, 0.10, 0.105, 0.2, 0.5, 2.0):
        (c,) = compare([result("k", 100.0, rel)], [result("k", 100.0, rel)], DEFAULT)
        if c.verdict == "agree":
            assert c.tolerance <= DEFAULT.noise_factor * DEFAULT_MAX_NOISE + 1e-12
        else:
            assert c.verdict == "unverifiable" and c.noise > DEFAULT_MAX_NOISE


def test_noisy_or_disagreeing_kernels_are_measured_again_and_the_quieter_is_judged() -> None:
    submitted = [
        result("quiet", 100.0, 0.02),
        result("noisy-rerun", 100.0, 0.02),
        result("off", 100.0, 0.02),
        result("gone", 100.0, 0.02),
    ]
    first = [
        result("quiet", 101.0, 0.02),
        result("noisy-rerun", 130.0, 0.30),
        result("off", 150.0, 0.02),
        result("gone", 0, 0, "failed"),
    ]
    asked: list[list[str]] = []

    def remeasure(ids: list[str]) -> list:
        asked.append(ids)
        return [result("noisy-rerun", 102.0, 0.03), result("off", 149.0, 0.01)]

    verdicts = {c.id: c for c in judge(submitted, first, DEFAULT, remeasure)}
    assert asked == [["noisy-rerun", "off"]]  # not the quiet one, nor one that did not run ok
    assert verdicts["quiet"].verdict == "agree" and not verdicts["quiet"].remeasured
    assert verdicts["noisy-rerun"].verdict == "agree" and verdicts["noisy-rerun"].remeasured
    assert verdicts["off"].verdict == "disagree" and verdicts["off"].rerun_us == 149.0  # the quieter re-run
    assert verdicts["gone"].verdict == "disagree"
    nothing = judge(
        [result("a", 10.0, 0.01)],
        [result("a", 10.1, 0.01)],
        DEFAULT,
        lambda ids: pytest.fail("nothing to measure again"),
    )
    assert nothing[0].verdict == "agree"


def test_a_noisier_second_measurement_does_not_replace_the_first() -> None:
    verdicts = judge(
        [result("k", 100.0, 0.02)], [result("k", 180.0, 0.05)], DEFAULT, lambda ids: [result("k", 100.0, 0.50)]
    )
    assert verdicts[0].rerun_us == 180.0 and verdicts[0].verdict == "disagree"


def test_longer_settings() -> None:
    from deepbench.kernels.results import Settings

    s = Settings(mode="fast", time_cap_s=0.2, min_sample_s=0.0005, min_time_s=0.0, kernel_timeout_s=1.0)
    again = longer(s)
    assert again.time_cap_s == pytest.approx(0.2 * REMEASURE_FACTOR)
    assert again.min_sample_s == pytest.approx(0.0005 * REMEASURE_FACTOR)
    assert again.kernel_timeout_s > again.time_cap_s


@pytest.mark.parametrize(
    "args, words",
    [
        (["--tolerance", "nan"], "--tolerance: must be a finite number"),
        (["--max-noise", "inf"], "--max-noise: must be a finite number"),
        (["--noise-factor", "-3"], "--noise-factor: must be at least 0"),
        (["--tolerance", "0.5", "--max-tolerance", "0.2"], "--max-tolerance (0.2) must be at least --tolerance (0.5)"),
    ],
)
def test_rule_is_checked_at_the_door(tmp_path, args: list[str], words: str) -> None:
    proc = run_cli("deepbench", "verify", str(tmp_path), "--local", *args)
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
