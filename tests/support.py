"""Helpers the test folders share, imported as ``support`` (pyproject's ``pythonpath`` puts ``tests/`` on ``sys.path``).

A folder's own helper modules import the same way (``from benchmark import fake_openai``); the scripts, the Lambda
handlers and ``app.py`` live outside ``tests/`` and are loaded by path with :func:`load_module`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib.util
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from hyperpod_dpd import DpdSpec, dump_spec
from hyperpod_dpd.spec import AutoscalingSpec, SloScaling, SloSpec
from hyperpod_dpd.spec.defaults import default_spec, default_spec_text
from hyperpod_dpd.traces import Lengths, Trace, at_rate

# The fixtures that start a real benchmark client against the stub server (tests/benchmark/conftest.py and its
# modules' own; seconds to a minute each, once per session or module), and the advisor's capacities (AIConfigurator's
# database, about 8 s): a test that uses one is marked slow, and `make test-fast` leaves it out.
SLOW_FIXTURES = frozenset({
    "tokenizer_dir", "healthy_run", "erroring_run", "failing_run", "short_run", "direct_run", "shared_run",
    "short_estimate_run", "open_loop_run", "open_loop_direct_run", "open_loop_failing_run", "closed_loop_run",
    "closed_loop_twin_run", "prefix_run", "partial_kv_run", "restart_run", "held_run", "cached_run", "replayed",
    "advised", "engine_oracle", "h200_oracle", "differential",  # vLLM's own process: 10-60 s to start
})


def load_module(name: str, path: Path) -> ModuleType:
    """The Python file ``path`` (a test helper, a script, ``app.py``) as module ``name``, once; later
    imports of ``name`` get the same module."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    spec.loader.exec_module(module)
    return module


class FakeClock:
    """``clock()`` and ``sleep()`` that only move time forward when slept."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def write_spec(tmp_path: Path, *replacements: tuple[str, str]) -> str:
    """The embedded default spec with each ``(old, new)`` text replaced, as a file; returns its path."""
    text = default_spec_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return str(path)


def run_bench(capsys: pytest.CaptureFixture[str], *argv: str, seams: Any = None) -> tuple[int, str, str]:
    """``hyperpod-dpd bench ARGV`` through ``main`` (with ``seams``, the benchmark session's): its status, standard
    output and standard error."""
    from hyperpod_dpd.cli import main  # the CLI loads cdk8s; only the bench tests need it

    code = main(["bench", *argv], seams=seams)
    out, err = capsys.readouterr()
    return code, out, err


def default_mapping() -> dict[str, Any]:
    """The embedded default spec as the plain data a spec file holds."""
    return dump_spec(default_spec())


def with_value(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``data`` with the dotted ``path`` set to ``value`` (missing parents made)."""
    changed = copy.deepcopy(data)
    *parents, last = path.split(".")
    node = changed
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return changed


def field_paths(mapping: dict[str, Any], prefix: str = "") -> list[str]:
    """Every dotted path of ``mapping``'s keys, parents before their children (for :func:`with_value`)."""
    found = []
    for key, value in mapping.items():
        path = f"{prefix}{key}"
        found.append(path)
        if isinstance(value, dict):
            found += field_paths(value, f"{path}.")
    return found


# --- fuzzing: what a spec file, a field or an option may hold --------------------------------------------------

yaml_pieces = st.sampled_from([
    "[", "]", "{", "}", ": ", ":", ",", "- ", "? ", "\n", "  ", "\t", "&a ", "*a", "&b ", "*b", "<<: ", "!!str ",
    "!!int ", "!!binary ", "!!timestamp ", "!!python/object ", "!x ", "---\n", "...\n", "#", '"', "'", "|\n", ">\n",
    ".nan", ".inf", "-.inf", "0x", "0o", "0b", "1_0", "1:30", "1e+400", "1.0e+400", "2020-02-30", "~", "null",
    "yes", "name: ", "model: ", "source: {s3: {bucket: b, prefix: p}}", "port: ", "env: ", "args: ",
    "gpu_memory_utilization: ", "prefill: ", "replicas: ", "\\", "\x00", "\ufeff", "é", "9" * 30,
])
yaml_documents = st.lists(yaml_pieces, max_size=60).map("".join)
extreme_numbers = st.one_of(st.integers(), st.integers(min_value=-(10**400), max_value=10**400),
                            st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([2**53, -(2**53), 0]))
plain_data = st.recursive(st.one_of(st.none(), st.booleans(), extreme_numbers, st.text(max_size=20)),
                          lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                  st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                          max_leaves=20)

# A spec file as the command-line and CDK-app fuzz write it: (name, bytes), relative to the example's folder.
SPEC_FILE = "spec.yaml"
_DEFAULT = default_mapping()
_FIELDS = field_paths(_DEFAULT)
# Values for paths stay inside the example's folder: the spec itself, a folder, a missing file, odd names.
PATH_VALUES = st.sampled_from(["-", "", SPEC_FILE, "spec.yaml/inside", "out", "missing/file.json", "a" * 300,
                               "é/ü", "a\x00b", ".", "..x", " "])
long_strings = st.tuples(st.sampled_from(["a", "é", "9", "-", " ", "\u202e", "\U0001f600", "{", "\\"]),
                         st.sampled_from([1, 64, 254, 1025, 70_000, 140_000])).map(lambda pair: pair[0] * pair[1])
field_values = st.one_of(plain_data, extreme_numbers, long_strings, st.text(max_size=40))
wrong_fields = st.tuples(st.sampled_from(_FIELDS), field_values).map(lambda pair: with_value(_DEFAULT, *pair))
config_json = st.one_of(PATH_VALUES, field_values).map(
    lambda value: with_value(_DEFAULT, "model.architecture", {"config_json": value}))
spec_files = st.one_of(
    config_json.map(lambda data: (SPEC_FILE, json.dumps(data).encode())),
    wrong_fields.map(lambda data: ("spec.json", json.dumps(data).encode())),
    wrong_fields.map(lambda data: (SPEC_FILE, json.dumps(data).encode())),  # YAML reads JSON (no NaN there)
    yaml_documents.map(lambda doc: (SPEC_FILE, (default_spec_text() + doc).encode())),
    yaml_documents.map(lambda doc: (SPEC_FILE, doc.encode())),
    st.binary(max_size=200).map(lambda data: (SPEC_FILE, default_spec_text().encode() + data)),
)


class Hang(BaseException):
    """Raised by the watchdog; a BaseException, so no handler of the code under test can swallow it."""


@contextlib.contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    """Raise :class:`Hang` in the code under test when it runs longer than ``seconds`` (main thread only)."""

    def fire(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# Stand-ins for the advisor's Advice, AdvicePoint and Estimate: the fields bench's prediction reads, no more.
@dataclass(frozen=True)
class FakeEstimate:
    ttft_s: float
    tpot_s: float
    e2e_s: float
    output_tokens_per_s: float
    gpus: int
    ttft_band_s: tuple[float, float] | None = None  # the advisor's own range, where it gives one
    tpot_band_s: tuple[float, float] | None = None


@dataclass(frozen=True)
class FakePoint:
    concurrency: int
    aggregated: FakeEstimate
    disaggregated: FakeEstimate
    request_rate: float | None = None


@dataclass(frozen=True)
class FakeAdvice:
    points: tuple[FakePoint, ...]
    assumptions: dict[str, str]


# --- the fuzz profiles ------------------------------------------------------------------------------------------
# HYPERPOD_DPD_FUZZ=deep runs every fuzz test DEEP_FACTOR times as long, randomized: a search for new failures.
# The default, "fast", keeps the suite quick and its runs repeatable (derandomized, no example database).
FUZZ_ENV = "HYPERPOD_DPD_FUZZ"
FUZZ_PROFILES = ("fast", "deep")
DEEP_FACTOR = 20
_FUZZ_COMMON: dict[str, Any] = {
    "database": None, "deadline": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
}


def fuzz_profile(environ: Mapping[str, str]) -> str:
    """The profile ``HYPERPOD_DPD_FUZZ`` names; unset or empty is "fast"."""
    name = environ.get(FUZZ_ENV, "") or FUZZ_PROFILES[0]
    if name not in FUZZ_PROFILES:
        raise pytest.UsageError(f"{FUZZ_ENV}: {name!r} is not a fuzz profile. Fix: set it to one of "
                                f"{', '.join(FUZZ_PROFILES)}, or unset it for fast")
    return name


def register_fuzz_profiles() -> None:
    """Register both profiles with Hypothesis; conftest loads the one the environment names."""
    settings.register_profile("fast", derandomize=True, **_FUZZ_COMMON)
    settings.register_profile("deep", derandomize=False, max_examples=100 * DEEP_FACTOR, **_FUZZ_COMMON)


def fuzz_examples(count: int) -> int:
    """A fuzz test's ``max_examples``: ``count`` in the fast profile, ``DEEP_FACTOR`` times it in the deep one."""
    return count * DEEP_FACTOR if fuzz_profile(os.environ) == "deep" else count


def poisson_trace(rate: Callable[[float], float], *, duration_s: float, seed: int, isl: int = 4096, osl: int = 256,
                  peak: float | None = None) -> Trace:
    """The traces package's Poisson arrivals at ``rate(t)`` per second (thinned from ``peak``, by default the rate's
    largest value on a minute grid), every request ``isl`` in and ``osl`` out: the load shapes the emulator's tests
    drive it with."""
    top = peak if peak is not None else max(rate(t) for t in range(0, int(duration_s) + 1, 60))
    return at_rate(rate, peak=top, duration_s=duration_s, seed=seed, input_tokens=Lengths(mean=isl),
                   output_tokens=Lengths(mean=osl))


# --- SLO autoscaling --------------------------------------------------------------------------------

SLO_WORKSPACE = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-1234abcd"


def slo_autoscaled(*, ttft_ms: int = 2000, tpot_ms: int = 50, prefill_max: int = 4, decode_max: int = 1) -> DpdSpec:
    """The default spec (Llama 3.3 70B, TP8 on ml.p5.48xlarge) with an SLO and SLO autoscaling on both roles."""
    spec = default_spec()
    return dataclasses.replace(
        spec, slo=SloSpec(ttft_ms=ttft_ms, tpot_ms=tpot_ms),
        metrics=dataclasses.replace(spec.metrics, amp_workspace_url=SLO_WORKSPACE),
        prefill=dataclasses.replace(spec.prefill, autoscaling=AutoscalingSpec(max_replicas=prefill_max,
                                                                              slo=SloScaling())),
        decode=dataclasses.replace(spec.decode, autoscaling=AutoscalingSpec(max_replicas=decode_max,
                                                                            slo=SloScaling())))


def with_slo_options(spec: DpdSpec, role: str = "prefill", **changes: Any) -> DpdSpec:
    """``spec`` with ``<role>.autoscaling.slo``'s fields changed."""
    cfg = dict(spec.roles())[role]
    assert cfg.autoscaling is not None and cfg.autoscaling.slo is not None
    scaling = dataclasses.replace(cfg.autoscaling, slo=dataclasses.replace(cfg.autoscaling.slo, **changes))
    changed = dataclasses.replace(cfg, autoscaling=scaling)
    if role == "prefill":
        return dataclasses.replace(spec, prefill=changed)
    return dataclasses.replace(spec, decode=changed)
