"""The suite's temporary files stay under pytest's folder (tests/conftest.py), which pytest prunes."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest


def test_temporary_files_go_under_pytests_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    base = tmp_path_factory.getbasetemp()
    assert Path(tempfile.gettempdir()).is_relative_to(base)
    with tempfile.TemporaryDirectory() as folder:
        assert Path(folder).is_relative_to(base)
    child = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.mkdtemp())"], capture_output=True,
                           text=True, check=True, env=os.environ.copy())
    made = Path(child.stdout.strip())
    assert made.is_relative_to(base)  # a subprocess's too
    made.rmdir()
