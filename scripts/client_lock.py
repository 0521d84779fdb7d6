"""Write the hash-pinned set of wheels the benchmark pod installs: one client and its whole dependency tree.

The versions are the ones installed beside this interpreter, where the test suite runs the client
against its stub, so the pod runs the client the tests ran. pip resolves them for the pod's platform
(CPython 3.11, manylinux x86_64, wheels only) and reports each wheel's sha256 without installing:

    python scripts/client_lock.py genai-bench > k8s/hyperpod_dpd/data/genai_bench_lock.json
    python scripts/client_lock.py aiperf > k8s/hyperpod_dpd/data/aiperf_lock.json

Both come from the same environment, so a package the two share is locked at one version. Needs the
bench extra installed and access to the package index (or PIP_INDEX_URL's mirror).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

CLIENTS = ("genai-bench", "aiperf")
PYTHON = "3.11"
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64", "linux_x86_64")


def installed_closure(root: str) -> dict[str, str]:
    """Every distribution ``root`` needs on Linux x86_64 CPython 3.11, with the version installed here."""
    environment = {**default_environment(), "python_version": PYTHON, "sys_platform": "linux",
                   "platform_system": "Linux", "platform_machine": "x86_64"}
    found: dict[str, str] = {}
    pending = [(root, frozenset[str]())]
    while pending:
        name, extras = pending.pop()
        dist = metadata.distribution(name)
        key = canonicalize_name(dist.metadata["Name"])
        if key in found and not extras:
            continue
        found[key] = dist.version
        for text in dist.requires or []:
            requirement = Requirement(text)
            marker_ok = requirement.marker is None or any(
                requirement.marker.evaluate({**environment, "extra": extra}) for extra in (extras or {""}))
            if marker_ok:
                pending.append((requirement.name, frozenset(requirement.extras)))
    return found


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] not in CLIENTS:
        choices = "|".join(CLIENTS)
        print(f"usage: python scripts/client_lock.py {{{choices}}} > k8s/hyperpod_dpd/data/<client>_lock.json",
              file=sys.stderr)
        return 2
    root = sys.argv[1]
    versions = installed_closure(root)
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text("".join(f"{name}=={version}\n" for name, version in sorted(versions.items())))
        report = Path(tmp) / "report.json"
        platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
        subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                        "--only-binary=:all:", *platforms, "--python-version", PYTHON, "--implementation", "cp",
                        "--target", str(Path(tmp) / "target"), "--report", str(report), "-c", str(constraints),
                        f"{root}=={versions[canonicalize_name(root)]}"], check=True)
        resolved = json.loads(report.read_text())["install"]
    wheels = sorted(({"name": canonicalize_name(item["metadata"]["name"]), "version": item["metadata"]["version"],
                      "sha256": item["download_info"]["archive_info"]["hashes"]["sha256"]} for item in resolved),
                    key=lambda wheel: wheel["name"])
    json.dump({"source": f"scripts/client_lock.py {root}: the versions installed beside the test suite, resolved "
                         f"for CPython {PYTHON} manylinux x86_64 wheels", "python": PYTHON, "wheels": wheels},
              sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
