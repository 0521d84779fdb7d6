#!/usr/bin/env python3
"""Lock each install level's whole dependency tree with hashes, and check an environment against its lock.

``pyproject.toml`` keeps the ranges a library's users need; the locks in ``locks/`` pin what ``make synth``
and ``make test`` install, so an upstream release changes nothing here until someone refreshes them:

    make lock                                   # python scripts/lock.py compile: rewrites every locks/*.txt
    python scripts/lock.py check test           # installed == locks/test.txt for this interpreter, else exit 1
    python scripts/lock.py check checkov --python .venv/checkov/bin/python

Levels: ``build`` (the build backend for the editable install), ``synth`` (the package with
``[observability]``), ``test`` (every extra; the
benchmark clients at the versions of the pod's own locks, ``k8s/hyperpod_dpd/data/*_lock.json``; every
package ``synth`` has at its ``synth`` version), ``checkov`` (its own venv) and ``engine`` (vLLM in
``.venv-engine``, whose own checks ``validate --engine`` runs). The locks are universal
(one file for every Python the project supports, markers where versions differ) and resolved by a pinned
uv from the public index. A refresh is its own commit, with the suite and the snapshots green.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCKS = REPO / "locks"
# The resolver that writes the locks; moving it is a refresh like any other.
UV_VERSION = "0.13.10"
REFRESH = "make lock"
CLIENT_LOCKS = ("k8s/hyperpod_dpd/data/genai_bench_lock.json", "k8s/hyperpod_dpd/data/aiperf_lock.json")
CHECKOV_VERSION = "3.3.30"
# The engine venv (.venv-engine): the vLLM the worker image runs, whose own checks `validate --engine` and the
# differential tests run (hyperpod_dpd/oracle). Kept equal to contracts/vllm.py's VLLM_VERSION by a test.
ENGINE_VLLM_VERSION = "0.19.0"
# Left out of the engine lock (and installed with --no-deps): GPU kernels and media libraries that vLLM's
# argument parsing and config construction never import; they save about 2.7 GB of the 11 GB venv.
ENGINE_LEFT_OUT = ("triton", "flashinfer-cubin", "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base",
                   "nvidia-cutlass-dsl-libs-core", "nvidia-cutlass-dsl-libs-cu12", "quack-kernels", "torchaudio",
                   "torchvision", "cuda-bindings", "nvidia-cudnn-frontend")
# The build backend that makes the editable install (pip's --build-constraint); not installed in the venv.
BUILD_TOOLS = ("setuptools>=77", "wheel")
# A venv on Python 3.11 starts with pip and setuptools: both are locked like everything else.
SEEDED = ("pip", "setuptools")
# Installed but never in a lock: the project itself.
PROJECT = "hyperpod-dpd"


@dataclass(frozen=True)
class Level:
    """One install level: what it resolves and which locks' pins it must keep."""

    name: str
    extras: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    from_project: bool = True
    # Locks whose pins this level keeps (a level installed on top of another must not move it).
    keeps: tuple[str, ...] = ()
    # JSON locks (the benchmark pod's) whose pins this level keeps: the tests run the clients the pod runs, and
    # `make synth` then `make test` moves nothing.
    keeps_json: tuple[str, ...] = ()
    # Packages resolved but not written to the lock (the level installs with --no-deps).
    left_out: tuple[str, ...] = ()


LEVELS: dict[str, Level] = {
    "build": Level("build", requirements=BUILD_TOOLS, from_project=False),
    "synth": Level("synth", extras=("observability",), requirements=SEEDED, keeps_json=CLIENT_LOCKS),
    "test": Level("test", extras=("dev", "advisor", "bench", "observability"), requirements=SEEDED,
                  keeps=("synth",), keeps_json=CLIENT_LOCKS),
    "checkov": Level("checkov", requirements=(f"checkov=={CHECKOV_VERSION}", *SEEDED), from_project=False),
    "engine": Level("engine", requirements=(f"vllm=={ENGINE_VLLM_VERSION}", *SEEDED), from_project=False,
                    left_out=ENGINE_LEFT_OUT),
}


def lock_path(level: str) -> Path:
    return LOCKS / f"{level}.txt"


# --- reading a lock ---------------------------------------------------------------------------------------

_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)"
                  r"\s*(?:;\s*(?P<marker>[^\\]+?))?\s*\\?$")


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    marker: str | None
    hashes: int


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(text: str) -> list[Pin]:
    """Every ``name==version [; marker]`` line of a hash-pinned requirements file, with its hash count."""
    pins: list[Pin] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("--hash=") and pins:
            last = pins[-1]
            pins[-1] = Pin(last.name, last.version, last.marker, last.hashes + 1)
            continue
        found = _PIN.match(line)
        if found:
            pins.append(Pin(canonical(found["name"]), found["version"], found["marker"], 0))
    return pins


def wanted(pins: Iterable[Pin], environment: Mapping[str, str]) -> dict[str, str]:
    """The pins whose marker holds in ``environment`` (the target interpreter's), by canonical name."""
    try:
        from packaging.markers import Marker  # noqa: PLC0415 - the compile step runs without it
    except ImportError:  # the synth level does not install packaging; pip carries a copy
        from pip._vendor.packaging.markers import Marker  # type: ignore[no-redef] # noqa: PLC0415

    return {pin.name: pin.version for pin in pins
            if pin.marker is None or Marker(pin.marker).evaluate(dict(environment))}


# --- checking an environment ------------------------------------------------------------------------------

_PROBE = """\
import json
from importlib import metadata
from packaging.markers import default_environment
seen = [[dist.metadata["Name"], dist.version] for dist in metadata.distributions() if dist.metadata["Name"]]
print(json.dumps({"installed": seen, "environment": default_environment()}))
"""

_PROBE_WITHOUT_PACKAGING = _PROBE.replace("from packaging.markers import default_environment",
                                          "from pip._vendor.packaging.markers import default_environment")


def probe(python: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    """What ``python`` has installed (canonical name: every version found, normally one) and its marker
    environment; isolated (``-I``), so neither PYTHONPATH, the working directory nor the user site counts."""
    for code in (_PROBE, _PROBE_WITHOUT_PACKAGING):
        result = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, timeout=120, check=False)
        if result.returncode == 0:
            data = json.loads(result.stdout)
            installed: dict[str, list[str]] = {}
            for name, version in data["installed"]:
                installed.setdefault(canonical(name), []).append(version)
            return installed, data["environment"]
    raise SystemExit(f"error: cannot list what {python} has installed: {result.stderr.strip().splitlines()[-1:]}")


def drift(locked: Mapping[str, str], installed: Mapping[str, Sequence[str]], *, level: str, source: str = "",
          allow_more: bool = False, project: bool = False) -> list[str]:
    """One line per difference between a lock and an environment: a wrong version, a missing, unlisted or doubly
    installed package (unlisted is no error with ``allow_more``: a level another is installed on top of), and,
    with ``project``, the project itself missing."""
    source = source or f"locks/{level}.txt"
    make = {"synth": "make synth", "engine": "make engine"}.get(level, "make test")
    fix = f"run '{make}' to reinstall from the locks (or '{REFRESH}' if the lock is what should move)"
    lines = []
    if project and PROJECT not in installed:
        lines.append(f"{PROJECT} itself is not installed in this environment; run '{make}'")
    for name in sorted(set(locked) | set(installed)):
        want, found = locked.get(name), list(installed.get(name, ()))
        if len(found) > 1:
            lines.append(f"{name} is installed {len(found)} times ({', '.join(found)}); run 'make clean {make[5:]}'")
            continue
        have = found[0] if found else None
        if name == PROJECT or want == have or (want is None and allow_more):
            continue
        if want is None:
            lines.append(f"installed {name} {have}, which {source} does not list; run 'make test' (it removes "
                         f"what the lock does not list)")
        elif have is None:
            lines.append(f"{name} is not installed, {source} says {want}; {fix}")
        else:
            lines.append(f"installed {name} {have}, {source} says {want}; {fix}")
    return lines


def check(level: str, python: str, *, lock: Path | None = None, allow_more: bool = False,
          remove_unlisted: bool = False, without_project: bool = False) -> int:
    """0 when ``python``'s environment holds exactly what the level's lock pins for it, else 1 with every
    difference named; ``remove_unlisted`` first uninstalls what the lock does not list (left by an older lock)."""
    path = lock or lock_path(level)
    pins = read_lock(path.read_text())
    installed, environment = probe(python)
    locked = wanted(pins, environment)
    unlisted = sorted(name for name in installed if name not in locked and name != PROJECT)
    if remove_unlisted and unlisted:
        print(f"removing what {path.name} no longer lists: {', '.join(unlisted)}")
        subprocess.run([python, "-m", "pip", "uninstall", "--quiet", "--yes", *unlisted], check=False)
        installed, _ = probe(python)
    source = f"locks/{path.name}" if path.parent == LOCKS else str(path)
    problems = drift(locked, installed, level=level, source=source, allow_more=allow_more,
                     project=LEVELS[level].from_project and not without_project)
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    if not problems:
        print(f"{level}: the {len(locked)} packages {source} pins for this Python are installed at its versions")
    return 1 if problems else 0


# --- compiling the locks ----------------------------------------------------------------------------------

def constraints(level: Level) -> list[str]:
    """Constraint lines for every pin this level must keep: another lock's pins with their markers, and the
    benchmark pod's pins on the pod's Python only (the tests run the pod's clients there)."""
    lines = set()
    for other in level.keeps:
        lines |= {f"{pin.name}=={pin.version}" + (f" ; {pin.marker}" if pin.marker else "")
                  for pin in read_lock(lock_path(other).read_text())}
    for path in level.keeps_json:
        pod = json.loads((REPO / path).read_text())
        lines |= {f"{w['name']}=={w['version']} ; python_version == '{pod['python']}'" for w in pod["wheels"]}
    return sorted(lines)


def compile_level(level: Level, uv: str, upgrade: tuple[str, ...] = ()) -> None:
    """Resolve one level into its lock. The lock's current pins are kept where they still satisfy the inputs (uv
    prefers an output file's versions), so editing pyproject.toml moves only what it must; ``upgrade`` names the
    packages to move to their newest allowed versions (``all``: every one)."""
    with tempfile.TemporaryDirectory() as scratch:
        inputs = Path(scratch) / f"{level.name}.in"
        inputs.write_text("".join(f"{r}\n" for r in level.requirements))
        command = [uv, "pip", "compile", "--quiet", "--no-config", "--universal", "--python-version", "3.11",
                   "--generate-hashes", "--no-strip-markers", "--custom-compile-command", REFRESH, "--output-file",
                   str(lock_path(level.name))]
        command += [f"--no-emit-package={name}" for name in level.left_out]
        command += ["--upgrade"] if "all" in upgrade else [f"--upgrade-package={name}" for name in upgrade]
        if level.from_project:
            command += [str(REPO / "pyproject.toml"), *(f"--extra={extra}" for extra in level.extras)]
        command.append(str(inputs))
        pins = constraints(level)
        if pins:
            kept = Path(scratch) / f"{level.name}-keeps.txt"
            kept.write_text("".join(f"{line}\n" for line in pins))
            command += ["--constraint", str(kept)]
        subprocess.run(command, check=True, cwd=REPO)
        # The lock names its inputs by file name only, so a refresh rewrites nothing but what moved.
        path = lock_path(level.name)
        path.write_text(path.read_text().replace(scratch + "/", "").replace(str(REPO) + "/", ""))


def pinned_uv() -> str:
    """uv UV_VERSION in ``.venv/uv``, (re)installed when absent or another version, so every refresh resolves
    with the same resolver."""
    venv = REPO / ".venv" / "uv"
    uv = venv / "bin" / "uv"
    if uv.exists():
        found = subprocess.run([str(uv), "--version"], capture_output=True, text=True, check=False).stdout.split()
        if found[1:2] == [UV_VERSION]:
            return str(uv)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--progress-bar", "off",
                    f"uv=={UV_VERSION}"], check=True)
    return str(uv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    compile_ = sub.add_parser("compile", help="rewrite every lock (needs uv and the package index)")
    compile_.add_argument("--uv", help=f"a uv executable (default: uv {UV_VERSION}, installed in .venv/uv)")
    compile_.add_argument("levels", nargs="*", metavar="LEVEL", help=f"default: all of {', '.join(LEVELS)}")
    compile_.add_argument("--upgrade", default="", metavar="NAMES",
                          help="comma-separated packages to move to their newest allowed versions, or 'all'; "
                               "default: keep every pin that still fits pyproject.toml")
    check_ = sub.add_parser("check", help="exit 1, naming each package, when an environment differs from its lock")
    check_.add_argument("level", choices=list(LEVELS))
    check_.add_argument("--python", default=sys.executable, help="the environment's interpreter (default: this one)")
    check_.add_argument("--lock", type=Path, help="another lock file to hold the environment against")
    check_.add_argument("--allow-more", action="store_true", help="packages the lock does not list are no error")
    check_.add_argument("--remove-unlisted", action="store_true", help="uninstall packages the lock does not list")
    check_.add_argument("--without-project", action="store_true", help="the project itself need not be installed yet")
    args = parser.parse_args(argv)
    if args.command == "check":
        return check(args.level, args.python, lock=args.lock, allow_more=args.allow_more,
                     remove_unlisted=args.remove_unlisted, without_project=args.without_project)
    unknown = sorted(set(args.levels) - set(LEVELS))
    if unknown:
        parser.error(f"unknown level {', '.join(unknown)}; the levels are {', '.join(LEVELS)}")
    LOCKS.mkdir(exist_ok=True)
    uv = args.uv or pinned_uv()
    # In LEVELS' order: test keeps synth's pins.
    for name in [name for name in LEVELS if name in args.levels or not args.levels]:
        compile_level(LEVELS[name], uv, tuple(filter(None, args.upgrade.split(","))))
        print(f"locks/{name}.txt: {len(read_lock(lock_path(name).read_text()))} pins")
    return 0


if __name__ == "__main__":
    sys.exit(main())
