"""The README and docs/ cannot drift from the code: generated parts are current, quoted outputs are re-run,
links resolve, and the README opens with what the project is and the two set-up commands."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import load_module

from hyperpod_dpd.cli import main

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = sorted(DOCS.glob("*.md"))
# Pages that parallel work adds; the README links them already.
PLANNED = {"deploy.md", "zero-to-endpoint.md", "alerts.md", "bench.md", "advise.md", "security.md"}

docs_script = load_module("docs_script", REPO / "scripts" / "docs.py")


@pytest.mark.parametrize("page", sorted(docs_script.GENERATED))
def test_generated_parts_are_current(page: str) -> None:
    text = (REPO / page).read_text()
    assert docs_script.render(page, text) == text, f"{page} is stale: run python scripts/docs.py"


def test_readme_opens_with_what_for_whom_and_the_two_commands() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    first_screen = "\n".join(lines[:15])
    assert "for ML platform engineers" in first_screen.replace("\n", " ").replace("For ML", "for ML")
    assert re.search(r"^make synth\b", first_screen, re.MULTILINE)
    assert re.search(r"^make test\b", first_screen, re.MULTILINE)
    assert first_screen.index("Disaggregated Prefill and Decode") < first_screen.index("make synth")
    assert len(lines) < 100, "the README is the front page; reference material belongs in docs/"


def test_readme_links_every_docs_page() -> None:
    readme = (REPO / "README.md").read_text()
    for page in [*PAGES, *(DOCS / name for name in PLANNED)]:
        assert f"(docs/{page.name})" in readme, page.name


@pytest.mark.parametrize("page", [REPO / "README.md", *PAGES], ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", page.read_text()):
        path = (page.parent / target).resolve()
        assert path.exists() or path.name in PLANNED, f"{page.name}: {target}"


@dataclass(frozen=True)
class Run:
    page: str
    command: str
    expected: list[str]


def _runs() -> list[Run]:
    runs = []
    for page in [REPO / "README.md", *PAGES]:
        for block in re.findall(r"```console\n(.*?)```", page.read_text(), re.DOTALL):
            command, expected = None, []
            for line in block.splitlines():
                if line.startswith("$ "):
                    if command:
                        runs.append(Run(page.name, command, expected))
                    command, expected = line[2:], []
                else:
                    expected.append(line)
            if command:
                runs.append(Run(page.name, command, expected))
    return runs


RUNS = _runs()


def test_the_docs_quote_command_outputs() -> None:
    assert {run.page for run in RUNS} >= {"checks.md", "commands.md", "sizing.md"}


def _execute(command: str, cwd: Path) -> list[str]:
    """Run a documented ``hyperpod-dpd ...`` line in-process, with ``; echo "exit $?"`` and ``| head -N``."""
    show_exit = command.endswith('; echo "exit $?"')
    command = command.removesuffix('; echo "exit $?"')
    head = None
    if match := re.search(r" \| head -(\d+)$", command):
        head = int(match.group(1))
        command = command[:match.start()]
    argv = shlex.split(command)
    assert argv[0] == "hyperpod-dpd", command
    both, out, err = io.StringIO(), _Tee(), _Tee()
    out.targets, err.targets = [both], [both]
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):  # type: ignore[type-var]
        try:
            code = main(argv[1:])
        except SystemExit as exited:
            code = int(exited.code or 0)
    # As in a terminal: without a pipe both streams in order; ``| head`` cuts standard output only.
    lines = both.getvalue().splitlines() if head is None else [
        *err.getvalue().splitlines(), *out.getvalue().splitlines()[:head]]
    return [*lines, f"exit {code}"] if show_exit else lines


class _Tee(io.StringIO):
    """A stream that also copies what it gets to ``targets`` (the interleaved terminal view)."""

    targets: list[io.StringIO]

    def write(self, text: str) -> int:
        for target in self.targets:
            target.write(text)
        return super().write(text)


def _matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line; a line ``...`` stands for any lines, a line ending in ``...`` for any line it starts."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(_matches(rest, actual[i:]) for i in range(len(actual) + 1))
    if not actual:
        return False
    ok = actual[0].startswith(head[:-3].rstrip()) if head.endswith("...") else actual[0] == head
    return ok and _matches(rest, actual[1:])


@pytest.mark.parametrize("run", RUNS, ids=lambda r: f"{r.page}: {r.command}")
def test_documented_output_is_what_the_command_prints(run: Run, tmp_path: Path) -> None:
    if " advise" in run.command and importlib.util.find_spec("aiconfigurator") is None:
        pytest.skip("advise needs the advisor extra: pip install '.[advisor]' in the checkout")
    shutil.copytree(DOCS / "examples", tmp_path, dirs_exist_ok=True)
    actual = _execute(run.command, tmp_path)
    assert _matches(run.expected, actual), "\n".join(["expected:", *run.expected, "actual:", *actual])


def test_the_docs_quote_the_cdk_app_as_cdk_json_runs_it_and_no_deprecated_flag() -> None:
    # The CDK CLI names the app command it ran (`<app>: Subprocess exited with error 2`); the docs quote that line,
    # and teach the current flag names (the deprecated ones are named only where commands.md says so).
    app = json.loads((REPO / "cdk.json").read_text())["app"]
    for page in [REPO / "README.md", *PAGES]:
        text = page.read_text()
        for quoted in re.findall(r"`([^`]+): Subprocess exited with error", text):
            assert quoted == app, (page.name, quoted)
        assert "from\n`python app.py`" not in text and "from `python app.py`" not in text, page.name
        assert not re.search(r"\bbench [^`\n]*--render\b", text), page.name


@pytest.mark.parametrize("page", ["README.md", "docs/deploy.md", "docs/zero-to-endpoint.md"])
def test_the_deploy_pages_give_the_hourly_cost_validate_prints(page: str) -> None:
    # validate prints the cost; the pages a user reads before `cdk deploy` gave none.
    from hyperpod_dpd.contracts.prices import node_cost
    from hyperpod_dpd.spec.defaults import default_spec

    hourly = node_cost(default_spec().node_usage()).usd_per_hour
    assert hourly is not None
    text = (REPO / page).read_text().replace("\n", " ")
    assert f"**${hourly:,.2f} an hour**" in text and "until `cdk destroy`" in text


def test_the_install_sizes_agree_across_the_makefile_readme_and_setup_page() -> None:
    # They said ~2 GB, about 3 GB and 2,782 MB for the same install; the Makefile now holds the measured figures.
    makefile = (REPO / "Makefile").read_text()
    synth = re.search(r"^SYNTH_SIZE := (.+)$", makefile, re.MULTILINE)
    test = re.search(r"^TEST_SIZE := (.+)$", makefile, re.MULTILINE)
    assert synth is not None and test is not None
    readme = (REPO / "README.md").read_text()
    assert f"(~{synth.group(1)}," in readme and f"(~{test.group(1)} more)" in readme
    setup = (REPO / "docs" / "setup.md").read_text().replace("\n", " ")
    assert f"`make synth` takes about {synth.group(1)} and `make test` adds about {test.group(1)} more" in setup
    assert "(about $(SYNTH_SIZE);" in makefile and "(about $(TEST_SIZE) more;" in makefile
    engine = re.search(r"^ENGINE_SIZE := (.+)$", makefile, re.MULTILINE)
    download = re.search(r"^ENGINE_DOWNLOAD := (.+)$", makefile, re.MULTILINE)
    assert engine is not None and download is not None
    assert f"about {download.group(1)} download, {engine.group(1)} on disk" in setup
    figures = set(re.findall(r"~?(\d+(?:\.\d+)?) GB", readme + makefile + setup))
    measured = {m.group(1).split()[0] for m in (synth, test, engine, download)}
    assert figures <= measured | {"0.3"}, figures  # 0.3: checkov's venv
