"""The Makefile's install step: a too-old Python stops before anything is made, a venv another Python made is
rebuilt, and each long step says what it installs. Runs make on a copy with stand-in interpreters (no pip)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STAMP = ".venv/.installed-synth"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _fake_python(path: Path, version: tuple[int, int]) -> Path:
    """Reports ``version``; ``-m venv DIR`` makes a venv whose python is another such stand-in; ``-m pip`` only
    logs its arguments to ``.venv/pip-calls``; ``-c`` runs on the real interpreter, with ``sys.version_info``
    faked for the version checks."""
    major, minor = version
    return _script(path, f"""\
case "$1" in
  --version) echo "Python {major}.{minor}.0" ;;
  -m) if [ "$2" = venv ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; fi
      if [ "$2" = pip ]; then echo "$*" >> "$(dirname "$0")/../pip-calls"
        case "$*" in *--quiet*) ;; *) printf 'Collecting a==1\n  Downloading a-1-py3-none-any.whl (45.2 MB)\n'
                                          printf '  noise\nInstalling collected packages: a, b, c\n'
                                          printf 'Successfully installed a-1 b-1 c-1\n' ;; esac; fi ;;
  -c) case "$2" in
        *version_info*) exec {sys.executable} -c "import sys; sys.version_info = ({major}, {minor}, 0); $2" ;;
        *) exec {sys.executable} -c "$2" ;;
      esac ;;
esac
""")


def _make(tmp_path: Path, python: Path) -> subprocess.CompletedProcess[str]:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copytree(REPO / "locks", tmp_path / "locks")
    (tmp_path / "scripts").mkdir(exist_ok=True)
    shutil.copy(REPO / "scripts" / "pip_lines.awk", tmp_path / "scripts")
    return subprocess.run(["make", "--no-print-directory", STAMP, f"PYTHON={python}"], cwd=tmp_path,
                          env={**os.environ, "MAKEFLAGS": ""}, capture_output=True, text=True, timeout=120,
                          check=False)


def test_a_too_old_python_stops_before_anything_is_created(tmp_path: Path) -> None:
    old = _fake_python(tmp_path / "bin" / "python3", (3, 10))
    result = _make(tmp_path, old)
    assert result.returncode != 0
    assert "error: hyperpod-dpd needs Python 3.11 or newer; " in result.stdout
    assert "is Python 3.10.0" in result.stdout and "PYTHON=python3.12" in result.stdout
    assert not (tmp_path / ".venv").exists()


def test_a_venv_built_by_another_python_is_rebuilt(tmp_path: Path) -> None:
    _fake_python(tmp_path / ".venv" / "bin" / "python", (3, 10))  # left by a first try with Python 3.10
    good = _fake_python(tmp_path / "bin" / "python3.12", (3, 12))
    result = _make(tmp_path, good)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "note: .venv was built by another Python (Python 3.10.0); rebuilding it with Python 3.12.0" in result.stdout
    assert "Python 3.12.0" in subprocess.run([tmp_path / ".venv" / "bin" / "python", "--version"],
                                             capture_output=True, text=True, check=True).stdout
    assert (tmp_path / STAMP).exists()


def test_each_install_step_says_what_and_how_long(tmp_path: Path) -> None:
    good = _fake_python(tmp_path / "bin" / "python3.12", (3, 12))
    result = _make(tmp_path, good)
    assert result.returncode == 0, result.stdout + result.stderr
    announced = [line for line in result.stdout.splitlines() if line.startswith(">>> ")]
    assert announced[0].startswith(">>> creating .venv with Python 3.12.0")
    assert announced[1].startswith(">>> installing hyperpod-dpd with [observability]")
    assert "minutes" in result.stdout
    assert "--quiet -e" not in result.stdout  # the long install is not silenced
    # pip unpacks without a word for about a minute after this line: the Makefile says so, with the count
    assert ">>> unpacking 3 packages into .venv; pip prints nothing more until it is done" in result.stdout
    assert "\nInstalling collected packages" not in result.stdout
    # setuptools' boxed note at the editable install is announced, with why it does not apply
    assert ">>> linking this checkout into .venv (an editable install" in result.stdout
    assert "prints a boxed BuildBackendWarning about folders named like the package" in result.stdout
    assert "Collecting a==1\n  Downloading a-1-py3-none-any.whl (45.2 MB)\n>>> unpacking" in result.stdout
    assert "Successfully installed a-1" in result.stdout and "noise" not in result.stdout


def test_the_install_takes_exactly_the_locks(tmp_path: Path) -> None:
    good = _fake_python(tmp_path / "bin" / "python3.12", (3, 12))
    result = _make(tmp_path, good)
    assert result.returncode == 0, result.stdout + result.stderr
    calls = (tmp_path / ".venv" / "pip-calls").read_text().splitlines()
    # in dependency order (no --no-deps: aws-cdk-lib must overwrite the path it shares with its schema package)
    # wheels only: a source build would fetch build tools no lock pins
    assert calls[0].startswith("-m pip install")
    assert calls[0].endswith("--require-hashes --only-binary=:all: -r locks/synth.txt")
    assert "--no-deps" not in calls[0]
    # the package itself: no dependencies resolved, built by the locked setuptools
    assert calls[1].endswith("--no-deps --build-constraint locks/build.txt -e .")
    assert len(calls) == 2
