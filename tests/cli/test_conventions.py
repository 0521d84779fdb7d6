"""The conventions of aws, cdk, kubectl and helm: --version, help, --json, ``-`` for stdin/stdout, one
output flag, warnings once."""

from __future__ import annotations

import argparse
import io
import json
import tomllib
from pathlib import Path

import pytest
import yaml

from hyperpod_dpd.cli import build_parser, main, version
from hyperpod_dpd.errors import install_extra
from hyperpod_dpd.spec.defaults import default_spec, default_spec_text
from hyperpod_dpd.spec.example import example_text
from hyperpod_dpd.spec.schema import schema_text

WARNED = default_spec_text().replace("decode:\n  replicas: 1", "decode:\n  replicas: 2")  # SingleDecoder


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"hyperpod-dpd {version()}\n"


def test_a_bare_call_prints_the_help_in_the_order_of_use(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: hyperpod-dpd")
    listed = [name for name in ("example", "schema", "validate", "synth") if f"    {name}" in out]
    assert listed == ["example", "schema", "validate", "synth"]
    assert out.index("    example") < out.index("    validate") < out.index("    synth")
    assert "exit status" in out


def test_every_reporting_command_has_json() -> None:
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    choices: dict[str, object] = subparsers.choices  # type: ignore[assignment]
    reporting = {"validate", "plan", "advise", "preflight", "verify", "bench"} & set(choices)
    assert "validate" in reporting
    for name in reporting:
        assert "--json" in choices[name].format_help(), name  # type: ignore[attr-defined]


def test_validate_json_when_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(WARNED)
    assert main(["validate", str(spec), "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["spec"] == str(spec) and document["valid"] is True and document["problems"] == []
    assert [w["code"] for w in document["warnings"]] == ["SingleDecoder"]
    assert set(document["warnings"][0]) == {"code", "field", "message"}
    assert captured.err == ""


def test_validate_json_when_invalid_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(default_spec_text().replace("tensor_parallel_size: 8", "tensor_paralel_size: 8"))
    assert main(["validate", str(spec), "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["valid"] is False and document["warnings"] == []
    (problem,) = document["problems"]
    assert problem == {"field": "tensor_paralel_size", "value": "tensor_paralel_size",
                       "message": "is not a known key",
                       "fix": "rename it to 'tensor_parallel_size' (removing it would drop the setting)"}


def test_dash_reads_the_spec_from_standard_input(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(WARNED))
    assert main(["validate", "-"]) == 0
    assert capsys.readouterr().out.endswith("\n<stdin>: valid (1 warning)\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("name: [x\n"))
    assert main(["plan", "-"]) == 2
    assert "invalid DPD spec in <stdin>" in capsys.readouterr().err


def test_dash_writes_manifests_to_standard_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["synth", "--output-dir", "-"]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in documents] == ["InferenceEndpointConfig"]
    assert list(tmp_path.iterdir()) == []  # no folder named '-'


def test_bench_writes_its_job_to_standard_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "-o", "-", "--run-id", "r1"]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in documents] == ["ServiceAccount", "Job"]
    assert list(tmp_path.iterdir()) == []


def test_observe_refuses_standard_output_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["observe", "-o", "-"]) == 2
    assert "Fix: pass a folder" in capsys.readouterr().err


@pytest.mark.parametrize(("command", "old"), [("synth", "--out"), ("observe", "--out"), ("bench", "--render")])
def test_one_output_flag_old_names_still_work_and_warn_once(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            command: str, old: str) -> None:
    assert main([command, old, str(tmp_path / "a"), old, str(tmp_path / "b")]) == 0
    captured = capsys.readouterr()
    assert captured.err.count(f"warning: {old} is deprecated; use --output-dir") == 1
    assert any((tmp_path / "b").iterdir())
    assert main([command, "-o", str(tmp_path / "c")]) == 0
    assert "deprecated" not in capsys.readouterr().err


def test_each_warning_is_printed_once_per_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(WARNED)
    for _ in range(2):  # and again in the next run
        assert main(["synth", str(spec), "-o", str(tmp_path / "out")]) == 0
        assert capsys.readouterr().err.count("[SingleDecoder]") == 1


def test_example_and_schema_commands_print_the_derived_texts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["example"]) == 0
    assert capsys.readouterr().out == example_text(default_spec())
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == schema_text()


def test_every_command_help_shows_examples() -> None:
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    choices: dict[str, argparse.ArgumentParser] = subparsers.choices  # type: ignore[assignment]
    for name, parser in choices.items():
        text = parser.format_help()
        assert "example:\n  hyperpod-dpd " in text or "examples:\n  hyperpod-dpd " in text, name


def test_an_extra_is_installed_from_the_checkout_by_a_name_pyproject_defines() -> None:
    # hyperpod-dpd is not on PyPI: `pip install 'hyperpod-dpd[advisor]'` would find nothing.
    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    defined = extras["project"]["optional-dependencies"]
    for extra in ("advisor", "bench", "observability"):
        assert extra in defined
        assert install_extra(extra).startswith(f"pip install '.[{extra}]' in the hyperpod-dpd checkout")
