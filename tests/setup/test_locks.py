"""The locks in locks/: every package of every install level pinned with hashes, the ranges in pyproject.toml
met, the levels consistent with each other and with the benchmark pod's locks, and the check that names drift."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker, default_environment
from packaging.requirements import Requirement
from support import load_module

REPO = Path(__file__).resolve().parents[2]
lock = load_module("lock_script", REPO / "scripts" / "lock.py")

PYTHONS = ("3.11", "3.12", "3.13", "3.14")


def _environment(python: str) -> dict[str, str]:
    return {**default_environment(), "python_version": python, "python_full_version": f"{python}.0",
            "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"}


def _pins(level: str, python: str = "3.11") -> dict[str, str]:
    return lock.wanted(lock.read_lock(lock.lock_path(level).read_text()), _environment(python))


@pytest.mark.parametrize("level", list(lock.LEVELS))
def test_every_package_is_pinned_with_its_hashes(level: str) -> None:
    pins = lock.read_lock(lock.lock_path(level).read_text())
    assert pins and all(pin.hashes >= 1 for pin in pins), [pin.name for pin in pins if not pin.hashes]
    for python in PYTHONS:  # one version of each package per Python: markers never overlap
        names = [pin.name for pin in pins
                 if pin.marker is None or Marker(pin.marker).evaluate(_environment(python))]
        assert len(names) == len(set(names)), python


@pytest.mark.parametrize("level", list(lock.LEVELS))
def test_a_lock_names_no_path_of_the_machine_that_wrote_it(level: str) -> None:
    text = lock.lock_path(level).read_text()
    assert not re.search(r"(/tmp/|/home/|/root/|/Users/|[A-Z]:\\)", text)
    assert "make lock" in text.split("\n", 3)[1]  # the header says how to refresh it


def _project_requirements(extras: tuple[str, ...]) -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    found = [Requirement(line) for line in project["dependencies"]]
    for extra in extras:
        found += [Requirement(line) for line in project["optional-dependencies"][extra]]
    return found


@pytest.mark.parametrize("level", ["synth", "test"])
@pytest.mark.parametrize("python", PYTHONS)
def test_the_lock_meets_every_range_pyproject_asks_for(level: str, python: str) -> None:
    """Editing a range in pyproject.toml without `make lock` fails here, not at a user's install."""
    pins = _pins(level, python)
    unmet = []
    for requirement in _project_requirements(lock.LEVELS[level].extras):
        if requirement.marker and not requirement.marker.evaluate(_environment(python)):
            continue
        name = lock.canonical(requirement.name)
        if name not in pins or not requirement.specifier.contains(pins[name], prereleases=True):
            unmet.append(f"{requirement} (locked: {pins.get(name)})")
    assert unmet == [], "run make lock"


@pytest.mark.parametrize("python", PYTHONS)
def test_make_test_after_make_synth_moves_no_package(python: str) -> None:
    synth, test = _pins("synth", python), _pins("test", python)
    assert {name: (version, test.get(name)) for name, version in synth.items() if test.get(name) != version} == {}


def test_the_tests_run_the_benchmark_clients_at_the_versions_the_pod_installs() -> None:
    test = _pins("test", "3.11")  # the pod's Python
    for path in lock.CLIENT_LOCKS:
        pod = {lock.canonical(w["name"]): w["version"] for w in json.loads((REPO / path).read_text())["wheels"]}
        assert {name: (version, test.get(name)) for name, version in pod.items() if test.get(name) != version} == {}


def test_the_build_lock_meets_the_build_system_requirements() -> None:
    build = _pins("build")
    for line in tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]:
        requirement = Requirement(line)
        assert requirement.specifier.contains(build[lock.canonical(requirement.name)])


def test_this_environment_is_exactly_the_test_lock(capsys: pytest.CaptureFixture[str]) -> None:
    assert lock.check("test", sys.executable) == 0, capsys.readouterr().err
    assert "are installed at its versions" in capsys.readouterr().out


def _tampered(tmp_path: Path, name: str, version: str) -> Path:
    """The test lock with ``name`` pinned at ``version`` instead (hashes kept: only versions are compared)."""
    text = lock.lock_path("test").read_text()
    changed, count = re.subn(rf"(?m)^{re.escape(name)}==[^ \\;]+", f"{name}=={version}", text)
    assert count == 1
    path = tmp_path / "test.txt"
    path.write_text(changed)
    return path


def test_a_deliberately_wrong_version_is_named_with_the_fix(tmp_path: Path) -> None:
    wrong = _tampered(tmp_path, "syrupy", "0.0.1")
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "lock.py"), "check", "test", "--lock", str(wrong)],
                            capture_output=True, text=True, timeout=120, check=False)
    installed = metadata.version("syrupy")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"error: installed syrupy {installed}, {wrong} says 0.0.1; run 'make test' to reinstall from the locks (or "
        "'make lock' if the lock is what should move)"]
    assert "Traceback" not in result.stderr


def test_missing_unlisted_and_doubly_installed_packages_are_named() -> None:
    reinstall = "run 'make test' to reinstall from the locks (or 'make lock' if the lock is what should move)"
    lines = lock.drift({"a": "1", "b": "2", "d": "4"}, {"a": ["1"], "c": ["3"], "d": ["4", "5"], "hyperpod-dpd": ["0"]},
                       level="test", project=True)
    assert lines == [
        f"b is not installed, locks/test.txt says 2; {reinstall}",
        "installed c 3, which locks/test.txt does not list; run 'make test' (it removes what the lock does not list)",
        "d is installed 2 times (4, 5); run 'make clean test'",
    ]
    # The synth level is installed under the test level: what test adds is no error there.
    assert lock.drift({"a": "1"}, {"a": ["1"], "c": ["3"]}, level="synth", allow_more=True) == []
    assert lock.drift({"a": "1"}, {"a": ["0"]}, level="synth")[0].endswith(
        "run 'make synth' to reinstall from the locks (or 'make lock' if the lock is what should move)")
    assert lock.drift({}, {}, level="synth", project=True) == [
        "hyperpod-dpd itself is not installed in this environment; run 'make synth'"]


def test_a_lock_line_with_a_marker_is_read_with_it() -> None:
    text = ("a-b==1.0 ; python_full_version < '3.13' \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb\n"
            "    # via x\nc_d==2 \\\n    --hash=sha256:cc\n")
    pins = lock.read_lock(text)
    assert [(p.name, p.version, p.marker, p.hashes) for p in pins] == [
        ("a-b", "1.0", "python_full_version < '3.13'", 2), ("c-d", "2", None, 1)]
    assert lock.wanted(pins, _environment("3.13")) == {"c-d": "2"}
    assert lock.wanted(pins, _environment("3.11")) == {"a-b": "1.0", "c-d": "2"}


def _owners() -> dict[str, list[str]]:
    """Every installed file (below site-packages) and the distributions whose RECORD lists it."""
    owners: dict[str, set[str]] = {}
    for dist in metadata.distributions():
        name = lock.canonical(dist.metadata["Name"])
        if name == lock.PROJECT:  # its editable metadata lists the checkout's own files
            continue
        for file in dist.files or ():
            path = str(file)
            if not path.startswith("..") and "__pycache__" not in path and ".dist-info/" not in path:
                owners.setdefault(path, set()).add(name)
    return {path: sorted(names) for path, names in owners.items()}


# Files two locked distributions both install, and the one whose copy a dependency-ordered install leaves.
SHARED_FILES = {"aws_cdk/cloud_assembly_schema/__init__.py": "aws-cdk-lib"}


def test_a_file_two_packages_install_is_the_one_a_dependency_ordered_install_leaves() -> None:
    """aws-cdk-lib and its dependency aws-cdk.cloud-assembly-schema both write aws_cdk/cloud_assembly_schema/: the
    lib's copy (installed after its dependency) registers the types the lib's metadata uses; the schema package's
    copy over it breaks every read of a stack's metadata ("Unknown interface: ...MetadataEntry")."""
    shared = {path: sorted(owners) for path, owners in _owners().items() if len(owners) > 1}
    assert sorted(shared) == sorted(SHARED_FILES), "a new shared file: say which copy must win"
    from aws_cdk import cloud_assembly_schema

    text = Path(cloud_assembly_schema.__file__).read_text(encoding="utf-8")
    assert 'jsii_type="aws-cdk-lib.cloud_assembly_schema.MetadataEntry"' in text, (
        "the schema package's copy overwrote aws-cdk-lib's: reinstall with 'make clean test'")
