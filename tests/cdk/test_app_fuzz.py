"""The CDK app never shows a traceback: any context and any spec file become a stack's options or problems.

The fuzz runs the app's reading and checking of its context (``stack_options``), the layer before jsii
builds anything, so it takes seconds; the cases below it run the app's ``main`` on one bad value each.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from cdk.cdk_support import REPO
from hypothesis import given, settings
from hypothesis import strategies as st
from support import PATH_VALUES, SPEC_FILE, Hang, extreme_numbers, fuzz_examples, spec_files, watchdog

from hyperpod_dpd import SpecError
from hyperpod_dpd.errors import EXIT_INTERNAL, INTERNAL_ERROR
from hyperpod_dpd.oracle.engine import ENGINE_PYTHON_ENV
from hyperpod_dpd_cdk.app import CONTEXT_KEYS, stack_options

FUZZ = settings(max_examples=fuzz_examples(150))  # the rest from the fuzz profile (tests/conftest.py)
WORDS = st.sampled_from(["true", "false", "TRUE", "yes", "0", "-1", "1e308", "nan", "inf", "0.25", "12", "13",
                         "private", "public", "10.0.0.0/8", "999.1.1.1/99", "us-west-2", "é", "usw2-az2", "1.34",
                         "STANDARD", "a=b", "a=b,c", "=", ",", "arn:aws:iam::123456789012:role/x", "bad name!",
                         "a" * 129, "HyperPodDpd", "vpc-1", " "])
VALUES = st.one_of(WORDS, PATH_VALUES, st.text(max_size=20), extreme_numbers, st.booleans(), st.none(),
                   st.lists(st.one_of(WORDS, st.integers()), max_size=3),
                   st.dictionaries(st.text(max_size=5), WORDS, max_size=2))
KEYS = st.sampled_from([key.name for key in CONTEXT_KEYS] + ["@aws-cdk/core:newStyleStackSynthesis",
                                                             "aws:cdk:enable-path-metadata", "stak_name", ""])


def _options_or_problems(context: dict[str, Any]) -> None:
    try:
        with watchdog(2.0):
            name, options = stack_options(context)
    except SpecError as err:
        assert err.problems
        json.dumps([p.to_json() for p in err.problems])
        str(err)
        return
    except Hang as hang:  # an AssertionError, so Hypothesis shrinks the context and reports it
        raise AssertionError(f"{context!r}: {hang}") from hang
    assert name and options["endpoints"]


@FUZZ
@given(st.dictionaries(KEYS, VALUES, max_size=5))
def test_any_context_is_options_or_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            context: dict[str, Any]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENGINE_PYTHON_ENV, str(tmp_path / "no-engine"))  # engine_check: its refusal, not a 30 s start
    (tmp_path / SPEC_FILE).write_text("name: x\n")
    _options_or_problems(context)


@settings(FUZZ, max_examples=fuzz_examples(60))
@given(spec_files, st.dictionaries(KEYS, WORDS, max_size=2))
def test_any_spec_file_is_options_or_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              spec: tuple[str, bytes], context: dict[str, Any]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENGINE_PYTHON_ENV, str(tmp_path / "no-engine"))
    name, data = spec
    (tmp_path / name).write_bytes(data)
    _options_or_problems({**context, "spec": name})


# --- the app's real path, one bad value each --------------------------------------------------------------------

@pytest.fixture
def direct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``python app.py`` without the CDK CLI, writing into ``tmp_path``."""
    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path / "out"))
    return tmp_path


@pytest.mark.parametrize(("context", "field", "message"), [
    ("stack_name=bad name!", "stack_name", "is not a CloudFormation stack name"),  # was jsii's RuntimeError
    ("stack_name=" + "a" * 129, "stack_name", "at most 128 characters"),  # was cdk-nag's ValidationFailed
    ("weights_staging_hours=1e308", "weights_staging_hours", "is not a number of hours from 0.25 to 12"),
    ("weights_staging_hours=-1", "weights_staging_hours", "from 0.25 to 12"),  # was DurationAmountsCannotNegative
    ("spec=a\x00b.yaml", "<file>", "cannot read the spec file: embedded null byte"),  # was a ValueError
    ("region=é", "region", "is not an AWS region name"),
    ("kubernetes_version=9.99", "kubernetes_version", "is not one of 1.33, 1.34"),  # refused by the stack itself
    ("spec=-", "spec", "reads standard input, which the CDK CLI does not pass to the app"),  # was "- -: <root>"
])
@pytest.mark.usefixtures("direct")
def test_a_bad_value_exits_2_naming_its_field(app_module: ModuleType, capsys: pytest.CaptureFixture[str],
                                              context: str, field: str, message: str) -> None:
    assert app_module.main(["-c", context], cdk_json=REPO / "cdk.json") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: invalid ") and "Traceback" not in err
    assert f"{field}: {message}" in err or (field in err and message in err), err


def test_a_malformed_cdk_json_exits_2_naming_the_file(app_module: ModuleType, direct: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    broken = direct / "cdk.json"
    broken.write_text('{"app": "python3 app.py", "context": {')
    assert app_module.main([], cdk_json=broken) == 2
    err = capsys.readouterr().err
    assert f"{broken}: cannot be read as JSON" in err and "Traceback" not in err
    broken.write_text('{"context": ["not", "an", "object"]}')
    assert app_module.main([], cdk_json=broken) == 2
    assert f"{broken}: context: is not a JSON object" in capsys.readouterr().err


def test_a_bug_is_one_line_naming_the_place(app_module: ModuleType, direct: Path,
                                            capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(context: object) -> None:
        raise KeyError("no such option")

    monkeypatch.setattr(app_module, "stack_options", broken)
    assert app_module.main([], cdk_json=REPO / "cdk.json") == EXIT_INTERNAL
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {INTERNAL_ERROR}: KeyError: 'no such option' at hyperpod_dpd_cdk/app.py:")
    assert line.endswith("to the hyperpod-dpd issue tracker")


def test_an_error_jsii_raises_is_the_same_one_line(app_module: ModuleType, direct: Path,
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A value no check refused reaches aws-cdk-lib, whose error comes back through jsii as a RuntimeError."""
    checked = app_module.stack_options
    monkeypatch.setattr(app_module, "stack_options", lambda context: ("bad name!", checked(context)[1]))
    assert app_module.main([], cdk_json=REPO / "cdk.json") == EXIT_INTERNAL
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {INTERNAL_ERROR}: RuntimeError: Stack name must match the regular expression")
