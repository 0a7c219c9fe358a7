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
