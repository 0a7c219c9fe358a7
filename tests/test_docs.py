"""The documentation in the repository: the site builds with `mkdocs build --strict` (a broken link,
anchor or nav entry fails it), the generated CLI reference covers every command and option, the
README stays a front door, and every deepbench command it shows parses with today's parsers."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
HOOK = ROOT / "docs" / "hooks" / "cli_reference.py"
README_MAX_LINES = 160
BUILD_TIMEOUT_S = 300
# Placeholders the README's commands use, and a value each parses as.
PLACEHOLDERS = {"RUN_ID": "run", "RUN_A": "a", "RUN_B": "b", "RUN": "run"}
PROGRAMS = ("deepbench-run", "deepbench")


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cli_reference", HOOK)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mkdocs_or_skip() -> None:
    """CI installs the docs extra (.ci/run), so there the build must run; elsewhere it may be absent."""
    missing = [name for name in ("mkdocs", "material") if importlib.util.find_spec(name) is None]
    if not missing:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{', '.join(missing)} not installed: CI installs the docs extra (.ci/run)")
    pytest.skip(f"{', '.join(missing)} not installed (pip install -e '.[docs]')")


@pytest.mark.slow
def test_site_builds_strict(tmp_path: Path) -> None:
    _mkdocs_or_skip()
    site = tmp_path / "site"
    p = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    cli_page = (site / "cli" / "index.html").read_text()
    assert "deepbench images build" in cli_page and "--kernel-timeout" in cli_page
    assert not (site / "hooks").exists(), "the hook's source must not be published"
    for page in site.rglob("index.html"):
        html = page.read_text()
        article = html[html.find("<article") : html.find("</article>")]
        # Python-Markdown needs a blank line before a list that follows a paragraph or a code block;
        # without it the items come out as one paragraph of "- " lines.
        stray = re.search(r"(?:<p>|\n)- (?:<strong>|<code>|[A-Za-z])", article)
        assert stray is None, (
            f"{page.relative_to(site)}: a list was not rendered as a list: {article[stray.start() :][:120]!r}"
        )


def test_cli_reference_covers_every_command_and_option() -> None:
    from deepbench.runner import cli
    from deepbench.runner.commands import COMMANDS

    page = _hook().render()
    assert cli.Parser.__name__ == "Parser", "the hook must put cli.Parser back"
    headings = set(re.findall(r"^#+ `([^`]+)`$", page, re.M))
    assert {"deepbench-run", "deepbench"} <= headings
    for module in COMMANDS:
        assert f"deepbench {module.NAME}" in headings, module.NAME
    assert {"deepbench images build", "deepbench models extract"} <= headings
    run_parser = _hook().built_parser(cli.run_main)
    for action in run_parser._actions:
        for option in action.option_strings:
            assert option in page, option


def test_cli_reference_is_option_tables_that_fit_the_page() -> None:
    """Every option of every command in a table row (option, value, default, help), never a raw
    --help block; every code block (usage, examples) within the hook's width."""
    hook = _hook()
    page = hook.render()
    blocks = re.findall(r"```text\n(.*?)\n```", page, re.S)
    width = max(hook.USAGE_WIDTH, hook.CODE_WIDTH)
    assert blocks and all(len(line) <= width for b in blocks for line in b.splitlines())
    assert "options:" not in "".join(blocks)  # argparse's option listing is not pasted anywhere
    rows = set(re.findall(r"^\| (`[^|]+`) \|", page, re.M))
    from deepbench.runner import cli

    for entry in (cli.run_main, cli.main):
        stack = [hook.built_parser(entry)]
        while stack:
            parser = stack.pop()
            for title, group_rows in hook.option_rows(parser):
                for row in group_rows:
                    assert row[0] in rows, (parser.prog, title, row[0])
            stack.extend(child for _, child in hook._subparsers(parser))
    compare = page[page.index("## `deepbench compare`") :]
    assert "| `--threshold` | FRACTION | `0.05` |" in compare


def test_readme_is_a_front_door() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_links_point_into_the_repository() -> None:
    text = README.read_text()
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        assert (ROOT / target).exists(), f"README links to {target}, which is not in the repository"


def test_no_citation_of_files_outside_the_repository() -> None:
    documents = [README, ROOT / "mkdocs.yml", *sorted((ROOT / "docs").rglob("*.md"))]
    for path in documents:
        text = path.read_text()
        for outside in ("DESIGN.md", "../shared"):
            assert outside not in text, f"{path.relative_to(ROOT)} cites {outside}, which is not in the repository"


def _readme_commands() -> list[list[str]]:
    """Every deepbench / deepbench-run invocation in the README's bash blocks, as argv lists."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), re.S):
        for line in block.splitlines():
            for segment in line.split("&&"):
                argv = shlex.split(segment, comments=True)
                if argv and argv[0] in PROGRAMS:
                    commands.append([PLACEHOLDERS.get(word, word) for word in argv])
    return commands


def test_readme_commands_parse() -> None:
    """Each command the README shows names options and choices that exist (it is not run here: the
    runs themselves are tried by hand from a fresh clone, some need a GPU or Docker)."""
    from deepbench.runner import cli

    hook = _hook()
    commands = _readme_commands()
    assert len(commands) >= 10, commands
    parsers = {"deepbench-run": hook.built_parser(cli.run_main), "deepbench": hook.built_parser(cli.main)}
    for argv in commands:
        try:
            argparse.ArgumentParser.parse_args(parsers[argv[0]], argv[1:])
        except SystemExit as exc:
            pytest.fail(f"README command does not parse (exit {exc.code}): {shlex.join(argv)}")


def test_readme_command_check_catches_a_wrong_option() -> None:
    """The parse check above can fail: an option that does not exist stops it."""
    from deepbench.runner import cli

    parser = _hook().built_parser(cli.run_main)
    with pytest.raises(SystemExit):
        argparse.ArgumentParser.parse_args(parser, ["--local", "--suite", "smoke", "--no-such-option"])


def _first_bash_block(path: Path) -> list[str]:
    block = re.search(r"```bash\n(.*?)```", path.read_text(), re.S)
    assert block, f"{path.relative_to(ROOT)} has no bash block"
    return block.group(1).splitlines()


def test_install_line_is_the_same_everywhere_and_names_what_exists() -> None:
    """The README's two commands (install and run; test) open docs/index.md and getting-started.md as well;
    the PyTorch CPU line is the one .ci/run installs with; every extra any install line names exists."""
    install, test = _first_bash_block(README)[:2]
    assert test == "python3 -m pytest" and ".ci/run" in README.read_text()
    assert test in (ROOT / ".ci" / "run").read_text().splitlines()[-1]
    for page in ("index.md", "getting-started.md"):
        lines = _first_bash_block(ROOT / "docs" / page)
        assert lines[lines.index(install) + 1] == test, page
    torch_cpu = install.split(" && ")[0]
    assert "--no-deps" in torch_cpu and "whl/cpu" in torch_cpu, "the first command must avoid PyPI's CUDA build"
    assert f"python3 -m {torch_cpu}".replace("pip install", "pip install -q") in (ROOT / ".ci" / "run").read_text()
    optional = re.search(r"\[project\.optional-dependencies\]\n(.*?)\n\[", (ROOT / "pyproject.toml").read_text(), re.S)
    assert optional
    extras = set(re.findall(r"^([a-z0-9-]+) = \[", optional.group(1), re.M))
    named = re.findall(r"-e '\.\[([a-z0-9,]+)\]'", README.read_text() + (ROOT / ".ci" / "run").read_text())
    assert named and all(set(group.split(",")) <= extras for group in named), named


# ----- what the documentation says can be run, and what it counts (issue 58) -----------------------------
DOCUMENTS = [README, *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
PROMPT = "$ "
EVIDENCE = ROOT / "docs" / "evidence"  # dated records of a sitting: what they counted then stays
# A doc's placeholders, and a value each parses as (a command is parsed, not run, with them).
DOC_PLACEHOLDERS = {"<run id>": "RUN_ID", "<version>": "0.1.0"}
# Commands that read only what ships with the repository and finish in seconds: run for real from the checkout.
READS_SHIPPED = ("runner/published/", "references", "models list", "list --suite")


def doc_commands() -> list[tuple[str, list[str]]]:
    """Every deepbench / deepbench-run command the README and docs/ show in a code block, as (where, argv):
    in a block of a terminal session only the lines after a "$ " prompt (the rest is output), elsewhere every
    line; backslash continuations joined, comments dropped, && and | split."""
    found = []
    for path in DOCUMENTS:
        for tag, block in FENCE.findall(path.read_text()):
            for key, value in DOC_PLACEHOLDERS.items():
                block = block.replace(key, value)
            lines = block.replace("\\\n", " ").splitlines()
            session = any(line.startswith(PROMPT) for line in lines)
            if tag == "text" and not session:
                continue  # printed output
            for line in lines:
                if session and not line.startswith(PROMPT):
                    continue
                for segment in re.split(r"&&|\|", line.removeprefix(PROMPT).split(" > ")[0]):
                    argv = shlex.split(segment, comments=True)
                    if argv and argv[0] in PROGRAMS:
                        found.append((str(path.relative_to(ROOT)), [PLACEHOLDERS.get(w, w) for w in argv]))
    return found


def test_every_command_the_docs_show_parses() -> None:
    """Each command of the README and docs/ names a program, subcommand, options and choices that exist today
    (a newcomer pastes them: an option renamed, or '[--format json]' typed as the doc wrote it, stops there)."""
    from deepbench.runner import cli

    hook = _hook()
    parsers = {"deepbench-run": hook.built_parser(cli.run_main), "deepbench": hook.built_parser(cli.main)}
    commands = doc_commands()
    assert len(commands) > 60, len(commands)
    for where, argv in commands:
        try:
            argparse.ArgumentParser.parse_args(parsers[argv[0]], argv[1:])
        except SystemExit as exc:
            pytest.fail(f"{where}: the command does not parse (exit {exc.code}): {shlex.join(argv)}")


@pytest.mark.slow
def test_the_docs_commands_that_read_shipped_results_run(tmp_path: Path) -> None:
    """The commands that need nothing but the checkout (reports and comparisons of the published runs, the
    references, the lists) run from it as written and exit 0; an --out goes to a temporary folder."""
    ran = set()
    for where, argv in doc_commands():
        line = shlex.join(argv)
        if argv[0] != "deepbench" or not any(s in line for s in READS_SHIPPED) or line in ran:
            continue
        ran.add(line)
        if "--out" in argv:
            at = argv.index("--out") + 1
            argv = [*argv[:at], str(tmp_path / Path(argv[at]).name), *argv[at + 1 :]]
        p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        assert p.returncode == 0, f"{where}: {line}: exit {p.returncode}: {p.stderr[-500:]}"
    assert len(ran) >= 8, ran


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def test_every_link_resolves_in_the_checkout() -> None:
    """A relative link (or image) of the README or docs/ names a file of the repository, as a reader of the
    checkout or of the repository's pages follows it, or the page the site build makes (cli.md)."""
    generated = _hook().PAGE
    for path in DOCUMENTS:
        for match in LINK.finditer(path.read_text()):
            target = (match.group(1) or match.group(2)).split("#")[0]
            if not target or re.match(r"[a-z]+:", target) or target == generated:
                continue
            assert (path.parent / target).exists(), f"{path.relative_to(ROOT)} links {target}, not in the checkout"


REPO_PATH = re.compile(r"`((?:runner|kernels|tests|images|docs|\.ci)/[\w./-]+)`")


def test_every_repository_path_the_docs_name_exists() -> None:
    """A path of this repository the docs name in code (`runner/render/table_fit.py`) is there."""
    for path in DOCUMENTS:
        for name in REPO_PATH.findall(path.read_text()):
            if any(c in name for c in "<>*") or name.endswith("/"):
                continue
            assert (ROOT / name).exists() or (ROOT / name.rstrip(".")).exists(), f"{path.relative_to(ROOT)}: {name}"


def _catalog_counts() -> dict[str, int]:
    from deepbench.kernels.suites import suite_kernels
    from deepbench.runner.analysis.references import references

    device = [k.op for k in suite_kernels("inference-device")]
    collectives = suite_kernels("collectives")
    return {
        "deepbench": sum(len(suite_kernels(s)) for s in ("train", "inference-server", "inference-device")),
        "smoke": len(suite_kernels("smoke")),
        "references": len(references()),
        "device gemm": device.count("gemm"),
        "device conv": device.count("conv"),
        "collective sizes": len({k.params()["floats"] for k in collectives}),
        "collectives": len(collectives),
        "device gemm and conv, two precisions": 2 * (device.count("gemm") + device.count("conv")),
    }


# Counts the prose states of the code's own things, each with where it comes from: every match must equal it.
CLAIMS = {
    r"DeepBench's (\d+) kernels": ("deepbench",),
    r"(\d+) kernels \(GEMMs, convolutions": ("smoke",),
    r"\((\d+) kernels: GEMMs, convolutions": ("smoke",),
    r"smoke: (\d+) kernels \(": ("smoke",),
    r"DeepBench's (\d+) published": ("references",),
    r"(\d+) GEMMs, (\d+) convolutions,": ("device gemm", "device conv"),
    r"(\d+) sizes, (\d+) kernels": ("collective sizes", "collectives"),
    r"GEMMs and convolutions in fp32 and int8 \((\d+) kernel runs\)": ("device gemm and conv, two precisions",),
}


def test_counts_in_prose_come_from_the_code() -> None:
    """Every count of the code's own things the README and docs/ state (DeepBench's 629 kernels, the smoke
    suite's 10, the 18 references, the device suite's GEMMs and convolutions, the collectives suite) is the
    code's, and each claim is still made somewhere (a reworded one is checked again, not forgotten); counts of
    a moment (tests passed) are not stated as the tool's outside the evidence pages, which record their date."""
    counts = _catalog_counts()
    text = {path: path.read_text() for path in DOCUMENTS}
    for pattern, keys in CLAIMS.items():
        seen = [(p, m) for p, t in text.items() for m in re.finditer(pattern, t)]
        assert seen, f"no document states {pattern!r} any more: drop it from CLAIMS"
        for path, match in seen:
            said = [int(g.replace(",", "")) for g in match.groups()]
            assert said == [counts[k] for k in keys], f"{path.relative_to(ROOT)}: {match.group(0)!r} {counts}"
    for path, t in text.items():
        if EVIDENCE in path.parents:
            continue
        stale = re.search(r"\d+ passed, \d+ skipped", t)
        assert stale is None, f"{path.relative_to(ROOT)} states a test run's tally: {stale.group(0)}"


def _sample_blocks() -> list[tuple[Path, list[str]]]:
    """The README's and Getting started's sample output of a first run (the text block that starts with
    deepbench-run's first line)."""
    out = []
    for path in (README, ROOT / "docs" / "getting-started.md"):
        for tag, block in FENCE.findall(path.read_text()):
            if tag == "text" and block.startswith("deepbench-run smoke on cpu"):
                out.append((path, block.splitlines()))
    return out


def test_the_sample_output_is_what_a_run_prints() -> None:
    """The sample of a first run shows today's output: a kernel's line as the progress prints it, the GEMM
    table's header as the run's table has it (median and IQR, not the older 'time'), the legend of marks
    word for word (the 'c contended' mark included)."""
    from deepbench.kernels.results_file import read_results
    from deepbench.runner.render.display import MARKS
    from deepbench.runner.render.tables import op_table

    headers = op_table("gemm", read_results(ROOT / "runner/published/nvidia-h100/train/results.jsonl.gz")).headers
    samples = _sample_blocks()
    assert len(samples) == 2, [p for p, _ in samples]
    for path, lines in samples:
        where = path.relative_to(ROOT)
        assert any(re.fullmatch(r"ok {10}gemm/\S+/fp32  median [\d,.]+ us", line) for line in lines), where
        header = next(line for line in lines if line.startswith("set "))
        assert [h.strip() for h in header.split("│")] == headers, where
        start = next(i for i, line in enumerate(lines) if line.startswith("~ unconverged"))
        legend = " ".join(lines[start : start + 3])
        assert " ".join(legend.split()) == " ".join(MARKS.split()), where
