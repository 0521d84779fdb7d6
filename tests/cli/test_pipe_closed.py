"""A command piped into `head` stops quietly: no traceback, and the exit status a shell tool gives on SIGPIPE."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hyperpod_dpd.cli import EXIT_BROKEN_PIPE


@pytest.mark.parametrize("argv", [["example"], ["schema"], ["plan"]], ids=" ".join)
def test_a_reader_that_leaves_early_gets_no_traceback(argv: list[str]) -> None:
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before the first byte, as `| head -c0` would leave it
    done = subprocess.run([sys.executable, "-m", "hyperpod_dpd.cli", *argv], stdout=writer,
                          stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    os.close(writer)
    assert done.stderr == ""
    assert done.returncode == EXIT_BROKEN_PIPE


def test_the_status_is_documented() -> None:
    from hyperpod_dpd.cli import EXIT_CODES

    assert f"  {EXIT_BROKEN_PIPE}  " in EXIT_CODES
