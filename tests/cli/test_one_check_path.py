"""One check path: a malformed spec gets the same problems from every command and from the CDK app.

Before, ``validate``, ``synth``, ``observe`` and ``bench`` ran the rules over the loader's placeholder
for a field it could not read and crashed with a traceback (first-hour audit F3), while ``plan``,
``advise`` and the app reported the problem; ``verify``, ``plan`` and ``preflight`` never ran the rules.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support import load_module

from hyperpod_dpd import SpecError
from hyperpod_dpd.cli import main
from hyperpod_dpd.spec.defaults import default_spec_text

REPO = Path(__file__).resolve().parents[2]

# A Prometheus trigger written without its `prometheus:` key, as a newcomer writes it.
TRIGGER_WITHOUT_KIND = ("prefill:\n  replicas: 1\n", "prefill:\n  replicas: 1\n  autoscaling:\n    max_replicas: 3\n"
                        "    triggers:\n      - name: queue\n        query: sum(x)\n        target_value: 1\n"
                        "        server_address: http://prometheus:9090\n")
# A wrong type and a broken rule in one file: both are reported, by every entry point.
TYPE_AND_RULE = ("decode:\n  replicas: 1\n", "decode:\n  replicas: 0\n  max_num_seqs: lots\n")

SPECS = {"trigger without its kind": [TRIGGER_WITHOUT_KIND], "a type and a rule": [TYPE_AND_RULE]}
EXPECTED = {"trigger without its kind": ["prefill.autoscaling.triggers[0]"],
            "a type and a rule": ["decode.max_num_seqs", "decode.replicas"]}

COMMANDS = {
    "validate": ["validate"], "synth": ["synth", "--out", "{tmp}/out"], "observe": ["observe", "--out", "{tmp}/obs"],
    "bench": ["bench", "--render", "{tmp}/bench"], "plan": ["plan"], "preflight": ["preflight"],
    "verify": ["verify", "--dry-run"],
    "advise": ["advise", "--isl", "4096", "--osl", "256", "--concurrency", "8"],
}
FIELD = re.compile(r"^  - (?:\S+: )??([A-Za-z_][\w.\[\]']*): ", re.MULTILINE)


def _spec(tmp_path: Path, case: str) -> str:
    text = default_spec_text()
    for old, new in SPECS[case]:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("case", sorted(SPECS))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_reports_the_same_problems(command: str, case: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec(tmp_path, case)
    argv = [arg.format(tmp=tmp_path) for arg in COMMANDS[command]]
    assert main([argv[0], spec, *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"invalid DPD spec in {spec}" in err
    assert sorted(FIELD.findall(err)) == EXPECTED[case], err


@pytest.fixture(scope="module")
def app_module() -> Any:
    return load_module("hyperpod_dpd_app", REPO / "app.py")


@pytest.mark.parametrize("case", sorted(SPECS))
def test_the_cdk_app_reports_the_same_problems(case: str, app_module: Any, tmp_path: Path) -> None:
    spec = _spec(tmp_path, case)
    with pytest.raises(SpecError) as error:
        app_module.build({"spec": spec})  # refused before any construct is built
    assert sorted(p.field.removeprefix(f"{spec}: ") for p in error.value.problems) == EXPECTED[case]
