"""What the command-line fuzz found, one case each, and the one line a bug prints instead of a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import default_mapping, with_value

from hyperpod_dpd.cli import EXIT_CODES, main
from hyperpod_dpd.clients.seams import Seams
from hyperpod_dpd.errors import EXIT_INTERNAL, INTERNAL_ERROR


@pytest.mark.parametrize(("argv", "message"), [
    # each was a ValueError ('embedded null byte') or an OSError ('File name too long') out of main()
    (["validate", "a\x00b"], "argument SPEC: 'a\\x00b' contains a NUL byte, which ends a path for the kernel"),
    (["synth", "-o", "a\x00b"], "argument -o/--output-dir: 'a\\x00b' contains a NUL byte"),
    (["observe", "--out", "a\x00b"], "argument --out: 'a\\x00b' contains a NUL byte"),
    (["plan", "--model-config", "a" * 300], "has a name of 300 bytes, over the 255 a Linux file name may have"),
    (["bench", "--results-dir", "a/" * 2100], "is 4200 bytes, over the 4095 a Linux path may have (PATH_MAX)"),
    (["verify", "--kubeconfig", "k\x00"], "argument --kubeconfig: 'k\\x00' contains a NUL byte"),
    # boto3's InvalidRegionError, raised halfway through preflight and verify
    (["preflight", "--region", "é"], "argument --region: 'é' is not an AWS region name; give e.g. us-west-2"),
    (["verify", "--region", "0"], "argument --region: '0' is not an AWS region name"),
    (["synth", "--region", "x y"], "argument --region: 'x y' is not an AWS region name"),
    # a wait of inf or nan seconds never ends (or prints 'infs')
    (["verify", "--timeout", "inf"], "argument --timeout: must be a finite number of seconds, more than 0 (got inf)"),
    (["verify", "--poll-interval", "nan"], "argument --poll-interval: must be a finite number of seconds"),
    (["bench", "--timeout", "inf"], "argument --timeout: must be a finite number of seconds"),
])
def test_an_option_no_system_call_could_take_is_a_usage_error(argv: list[str], message: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and message in err and "Traceback" not in err


def test_a_region_from_the_environment_that_boto3_refuses_is_a_usage_error(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "x y")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert main(["preflight"]) == 2
    err = capsys.readouterr().err
    assert "'x y' is not an AWS region name (from --region, AWS_DEFAULT_REGION or the profile)" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("path", "message"), [
    ("a\x00b", "cannot be a path: it contains a NUL byte"),
    ("c" * 300 + "/config.json", "cannot be a path: it has a name of 300 bytes"),
])
def test_a_config_json_path_no_system_call_could_take_is_a_problem(tmp_path: Path, path: str, message: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(with_value(default_mapping(), "model.architecture", {"config_json": path})))
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert f"model.architecture.config_json: {message}" in err and "Traceback" not in err


def test_a_bug_is_one_line_naming_the_place_and_where_to_report_it(capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("decode")

    # a bug inside preflight's workflow, after the spec was read and checked
    assert main(["preflight"], seams=Seams(aws_clients=broken)) == EXIT_INTERNAL  # type: ignore[arg-type]
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"hyperpod-dpd: {INTERNAL_ERROR}: KeyError: 'decode' at hyperpod_dpd/ops/preflight.py:")
    assert line.endswith("`hyperpod-dpd --version` to the hyperpod-dpd issue tracker")
    assert f"  {EXIT_INTERNAL}  an internal error, a bug in hyperpod-dpd" in EXIT_CODES


def test_ctrl_c_is_one_line_and_the_status_a_shell_reports(capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    assert main(["preflight"], seams=Seams(aws_clients=interrupted)) == 130  # type: ignore[arg-type]
    assert capsys.readouterr().err == "hyperpod-dpd: interrupted\n"


def test_a_closed_standard_input_is_a_usage_error(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", None)  # what Python gives a process started with `<&-`
    assert main(["validate", "-"]) == 2
    err = capsys.readouterr().err
    assert "<stdin>: is closed, so no spec can be read from it" in err and "Traceback" not in err
