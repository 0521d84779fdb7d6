"""The benchmark pod installs exactly the clients the tests run: every wheel pinned by version and sha256."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from importlib import metadata
from pathlib import Path

import pytest

from hyperpod_dpd.benchmark import BenchmarkTarget, Scenario
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.job import (
    AIPERF_VERSION,
    GENAI_BENCH_VERSION,
    JobOptions,
    client_lock,
    render_benchmark_job,
)
from hyperpod_dpd.spec import DpdSpec

LOCK_LINE = re.compile(r"^(?P<name>[a-z0-9-]+)==(?P<version>\S+) --hash=sha256:[0-9a-f]{64}$")
VERSIONS = {Client.GENAI_BENCH: GENAI_BENCH_VERSION, Client.AIPERF: AIPERF_VERSION}


@pytest.mark.parametrize("client", list(Client))
def test_the_lock_pins_every_wheel_with_a_hash(client: Client) -> None:
    version, lines = client_lock(client)
    assert version == VERSIONS[client]
    names = [LOCK_LINE.match(line)["name"] for line in lines]  # type: ignore[index]
    assert len(names) == len(set(names)) > 50 and client.value in names and "transformers" in names


def test_the_two_locks_agree_on_every_package_they_share() -> None:
    """Both come from one environment, so the tests run both clients beside each other."""
    pins = [dict(line.split(" ", 1)[0].split("==") for line in client_lock(client)[1]) for client in Client]
    shared = set(pins[0]) & set(pins[1])
    assert len(shared) > 30 and {name: (pins[0][name], pins[1][name]) for name in shared
                                 if pins[0][name] != pins[1][name]} == {}


@pytest.mark.parametrize("client", list(Client))
def test_the_lock_is_the_set_the_tests_run(client: Client) -> None:
    """What scripts/client_lock.py resolved must still be what is installed beside the tests."""
    if importlib.util.find_spec(client.module) is None:
        pytest.skip("the bench extra is not installed: pip install '.[bench]'")
    _, lines = client_lock(client)
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
    assert drift == [], f"re-run scripts/client_lock.py {client.value}: " + "; ".join(drift)


def _benchmark_container(spec: DpdSpec, options: JobOptions, client: Client) -> dict[str, object]:
    load = {"request_rates": (2.0,)} if client is Client.AIPERF else {"concurrency": (2,)}
    objects = render_benchmark_job(BenchmarkTarget.for_spec(spec), Scenario(requests=8, max_seconds=60, client=client,
                                                                                 **load),
                                   options)
    pod = next(o for o in objects if o["kind"] == "Job")["spec"]["template"]["spec"]
    found: dict[str, object] = next(c for c in pod["initContainers"] if c["name"] == "benchmark")
    return found


@pytest.mark.parametrize(("client", "version"), [(Client.GENAI_BENCH, GENAI_BENCH_VERSION),
                                                 (Client.GENAI_BENCH, "0.0.4"), (Client.AIPERF, AIPERF_VERSION),
                                                 (Client.AIPERF, "0.12.0")])
def test_the_pod_installs_the_lock_with_hashes_required(spec: DpdSpec, tmp_path: Path, client: Client,
                                                        version: str) -> None:
    """The rendered script, run with a pip that records what it was asked (and no client on PATH)."""
    version_option = "aiperf_version" if client is Client.AIPERF else "genai_bench_version"
    options = JobOptions(run_id="r1", pip_index_url="https://mirror.example/simple", **{version_option: version})
    container = _benchmark_container(spec, options, client)
    env = {e["name"]: e["value"] for e in container["env"]}  # type: ignore[attr-defined]
    assert env["PIP_INDEX_URL"] == "https://mirror.example/simple"
    bin_dir, root = tmp_path / "bin", tmp_path / "root"
    bin_dir.mkdir()
    (root / "results").mkdir(parents=True)
    lock = f"{root}/tmp/{client.value}.lock"
    (bin_dir / "pip").write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/pip-args"\n'
                                 f'[ -f "{lock}" ] && cp "{lock}" "{tmp_path}/lock"\nexit 1\n')
    (bin_dir / "pip").chmod(0o755)
    (root / "tmp").mkdir()
    script = re.sub(r"(?<![\w/])/(results|tmp)\b", lambda m: f"{root}/{m[1]}",
                    str(container["command"][2]))  # type: ignore[index]
    done = subprocess.run(["sh", "-c", script, client.value], capture_output=True, text=True, check=False,
                          env={**env, "PATH": f"{bin_dir}:/usr/bin:/bin", "QUIET_SECONDS": "0",
                               "HOME": str(tmp_path)}, cwd=tmp_path)
    assert done.returncode == 0 and (root / "results" / "exit-code").read_text().strip() == "97"
    args = (tmp_path / "pip-args").read_text().split()
    if version == VERSIONS[client]:
        assert "--require-hashes" in args and "--no-deps" in args and "--only-binary=:all:" in args
        assert (tmp_path / "lock").read_text().splitlines() == list(client_lock(client)[1])
    else:
        assert "--require-hashes" not in args and f"{client.value}=={version}" in args
