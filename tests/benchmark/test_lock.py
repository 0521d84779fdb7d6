"""The benchmark pod installs exactly the client the tests run: every wheel pinned by version and sha256."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from hyperpod_dpd.benchmark import BenchmarkTarget, Scenario
from hyperpod_dpd.benchmark.job import GENAI_BENCH_VERSION, JobOptions, genai_bench_lock, render_benchmark_job
from hyperpod_dpd.spec import DpdSpec

LOCK_LINE = re.compile(r"^(?P<name>[a-z0-9-]+)==(?P<version>\S+) --hash=sha256:[0-9a-f]{64}$")


def test_the_lock_pins_every_wheel_with_a_hash() -> None:
    version, lines = genai_bench_lock()
    assert version == GENAI_BENCH_VERSION
    names = [LOCK_LINE.match(line)["name"] for line in lines]  # type: ignore[index]
    assert len(names) == len(set(names)) > 50 and "genai-bench" in names and "transformers" in names


def test_the_lock_is_the_set_the_tests_run() -> None:
    """What scripts/genai_bench_lock.py resolved must still be what is installed beside the tests."""
    if importlib.util.find_spec("genai_bench") is None:
        pytest.skip("the bench extra is not installed: pip install '.[bench]'")
    _, lines = genai_bench_lock()
    drift = []
    for line in lines:
        found = LOCK_LINE.match(line)
        assert found is not None, line
        try:
            installed = metadata.version(found["name"])
        except metadata.PackageNotFoundError:
            installed = None
        if installed != found["version"]:
            drift.append(f"{found['name']}: locked {found['version']}, installed {installed}")
    assert drift == [], "re-run scripts/genai_bench_lock.py: " + "; ".join(drift)


def _benchmark_container(spec: DpdSpec, options: JobOptions) -> dict[str, object]:
    objects = render_benchmark_job(BenchmarkTarget.for_spec(spec), Scenario(concurrency=(2,), requests=8,
                                                                           max_seconds=60), options)
    pod = next(o for o in objects if o["kind"] == "Job")["spec"]["template"]["spec"]
    found: dict[str, object] = next(c for c in pod["initContainers"] if c["name"] == "benchmark")
    return found


@pytest.mark.parametrize("version", [GENAI_BENCH_VERSION, "0.0.4"])
def test_the_pod_installs_the_lock_with_hashes_required(spec: DpdSpec, tmp_path: Path, version: str) -> None:
    """The rendered script, run with a pip that records what it was asked (and no genai-bench on PATH)."""
    container = _benchmark_container(spec, JobOptions(run_id="r1", genai_bench_version=version,
                                                      pip_index_url="https://mirror.example/simple"))
    env = {e["name"]: e["value"] for e in container["env"]}  # type: ignore[attr-defined]
    assert env["PIP_INDEX_URL"] == "https://mirror.example/simple"
    bin_dir, root = tmp_path / "bin", tmp_path / "root"
    bin_dir.mkdir()
    (root / "results").mkdir(parents=True)
    (bin_dir / "pip").write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/pip-args"\n'
                                 f'[ -f "{root}/tmp/genai-bench.lock" ] && cp "{root}/tmp/genai-bench.lock" '
                                 f'"{tmp_path}/lock"\nexit 1\n')
    (bin_dir / "pip").chmod(0o755)
    (root / "tmp").mkdir()
    script = re.sub(r"(?<![\w/])/(results|tmp)\b", lambda m: f"{root}/{m[1]}",
                    str(container["command"][2]))  # type: ignore[index]
    done = subprocess.run(["sh", "-c", script, "genai-bench"], capture_output=True, text=True, check=False,
                          env={**env, "PATH": f"{bin_dir}:/usr/bin:/bin", "QUIET_SECONDS": "0",
                               "HOME": str(tmp_path)}, cwd=tmp_path)
    assert done.returncode == 0 and (root / "results" / "exit-code").read_text().strip() == "97"
    args = (tmp_path / "pip-args").read_text().split()
    if version == GENAI_BENCH_VERSION:
        assert "--require-hashes" in args and "--no-deps" in args and "--only-binary=:all:" in args
        assert (tmp_path / "lock").read_text().splitlines() == list(genai_bench_lock()[1])
    else:
        assert "--require-hashes" not in args and f"genai-bench=={version}" in args
