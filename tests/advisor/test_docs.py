"""docs/advise.md quotes command output: each quoted command runs here and must print what is quoted."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hyperpod_dpd.advisor import Traffic, advise
from hyperpod_dpd.advisor.steps import PhaseFactors
from hyperpod_dpd.cli import main
from hyperpod_dpd.spec.defaults import default_spec

DOC = Path(__file__).resolve().parents[2] / "docs" / "advise.md"
BLOCK = re.compile(r"```text\n\$ (hyperpod-dpd advise[^\n]*)\n(.*?)```", re.DOTALL)
ELIDED = "[...]"


def quoted() -> list[tuple[str, list[str]]]:
    return [(command, body.rstrip("\n").split("\n")) for command, body in BLOCK.findall(DOC.read_text())]


def matches(expected: list[str], actual: list[str]) -> bool:
    """Every expected line in order; ``[...]`` skips any number of lines, otherwise lines are consecutive."""
    position = 0
    skipping = False
    for line in expected:
        if line == ELIDED:
            skipping = True
            continue
        if skipping:
            found = [i for i in range(position, len(actual)) if actual[i] == line]
            if not found:
                return False
            position = found[0] + 1
        else:
            if position >= len(actual) or actual[position] != line:
                return False
            position += 1
        skipping = False
    return skipping or position == len(actual)


def test_the_doc_quotes_every_mode() -> None:
    commands = " ".join(command for command, _ in quoted())
    for mode in ("--concurrency 8,16,32", "--search --write-spec", "--request-rate", "--calibrate"):
        assert mode in commands


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in an empty folder, as the doc's relative file names assume."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(("command", "expected"), quoted(), ids=[c for c, _ in quoted()])
def test_quoted_output_is_what_the_command_prints(command: str, expected: list[str], in_tmp: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  bench_of: Callable[..., dict[str, Any]]) -> None:
    tmp_path = in_tmp
    argv = shlex.split(command)[1:]
    if "--calibrate" in argv:  # the slower endpoint the doc describes, as bench --json prints it
        measured = advise(default_spec(), Traffic(isl=4096, osl=256, concurrency=(8, 16, 32)), baseline_nodes=1,
                          factors=PhaseFactors(prefill=1.4, decode=1.2))
        (tmp_path / "bench.json").write_text(json.dumps(bench_of(measured)))
    assert main(argv) in (0, 1)
    captured = capsys.readouterr()
    # In a terminal the calibration report (stderr) comes first and "wrote ..." (stderr) last.
    text = captured.err + captured.out if "--calibrate" in argv else captured.out + captured.err
    assert matches(expected, text.rstrip("\n").split("\n")), text
    if "--write-spec" in argv:
        assert main(["validate", "best.yaml"]) == 0


def test_matcher() -> None:
    assert matches(["a", ELIDED, "c"], ["a", "b", "c"])
    assert not matches(["a", "c"], ["a", "b", "c"])
    assert matches([ELIDED, "b", ELIDED], ["a", "b", "c"])
    assert not matches(["a", ELIDED, "d"], ["a", "b", "c"])
