"""The metrics contract: vLLM's and LMCache's families as their source defines them, re-derivable by script."""

from __future__ import annotations

import json
import urllib.error
from pathlib import Path
from types import ModuleType

import pytest
from support import load_module

from hyperpod_dpd.observability.metrics import ALL_METRICS, Exporter, Kind, derived_families, series_names

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "k8s" / "hyperpod_dpd" / "data" / "metrics-contract.json"
SHA256 = {"vllm": "81e59cf87175e7a62eb8d9acf5989484bbd17089d5eface353f89067bda282d9",
          "lmcache": "dfa71984af7a79842eb635e64882b17604aebac0aa5e520e8f0e9d21df53ad20"}


def _generator() -> ModuleType:
    return load_module("metrics_contract_script", REPO / "scripts" / "metrics_contract.py")


def _family(metric_name: str) -> str:
    """The family a contract entry is keyed by (prometheus_client appends _total to a counter)."""
    return metric_name.removesuffix("_total")


@pytest.mark.parametrize("metric", [m for m in ALL_METRICS if m.exporter in (Exporter.VLLM, Exporter.LMCACHE)],
                         ids=lambda m: m.name)
def test_each_engine_series_we_read_is_defined_by_the_engine(metric: object) -> None:
    from hyperpod_dpd.observability.metrics import Metric

    assert isinstance(metric, Metric)
    entry = derived_families()[_family(metric.name)]
    assert entry["kind"] == metric.kind.value
    assert set(series_names(metric)) <= set(entry["series"])
    if metric.buckets:
        assert tuple(entry["buckets"]) == metric.buckets
    if metric.name == "vllm:prompt_tokens_by_source_total":
        assert entry["extra_labels"] == ["source"]


def test_the_inter_token_histogram_starts_at_10_ms() -> None:
    """The number the TPOT SLO floor rests on (audit O8), read from vLLM's source."""
    assert derived_families()["vllm:inter_token_latency_seconds"]["buckets"][0] == 0.01
    assert derived_families()["vllm:time_to_first_token_seconds"]["buckets"][0] == 0.001


def test_the_generator_reads_literal_and_bound_buckets_and_counter_suffixes() -> None:
    source = '''
class Logger:
    def __init__(self, labelnames):
        profiling = [0.5, 1, 2]
        self.a = self._histogram_cls(name="vllm:a_seconds", documentation="", buckets=[0.01, 0.1],
                                     labelnames=labelnames)
        self.b = self._create_histogram(name="lmcache:b", documentation="", labelnames=labelnames, buckets=profiling)
        self.c = self._counter_cls(name="vllm:c", documentation="", labelnames=labelnames + ["source"])
        self.d = self._gauge_cls(name="other_d", documentation="", labelnames=labelnames)
'''
    found = {f.name: f for f in _generator().families("x.py", source)}
    assert set(found) == {"vllm:a_seconds", "lmcache:b", "vllm:c"}
    assert found["vllm:a_seconds"].buckets == (0.01, 0.1) and found["lmcache:b"].buckets == (0.5, 1.0, 2.0)
    assert found["vllm:c"].series() == ["vllm:c_total"] and found["vllm:c"].extra_labels == ("source",)
    assert found["vllm:a_seconds"].source == "x.py:5"


def test_provenance_names_both_artifacts() -> None:
    provenance = json.loads(SHIPPED.read_text(encoding="utf-8"))["provenance"]
    assert provenance["generator"] == "scripts/metrics_contract.py"
    assert {p: a["sha256"] for p, a in provenance["artifacts"].items()} == SHA256


@pytest.fixture(scope="session")
def sdists(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """vLLM 0.19.0's and LMCache 0.4.3's sdists from PyPI, kept in pytest's cache folder between runs."""
    generator = _generator()
    cache = getattr(request.config, "cache", None)
    found: dict[str, Path] = {}
    for package, filename in generator.ARTIFACTS.items():
        folder = Path(cache.mkdir(f"{package}-sdist")) if cache is not None else tmp_path_factory.mktemp(package)
        try:
            path, digest = generator.fetch_sdist(folder, project=package, filename=filename, timeout=60)
        except (TimeoutError, urllib.error.URLError, ConnectionError) as err:
            pytest.skip(f"PyPI is unreachable, so the contract cannot be re-derived here ({err})")
        assert digest == SHA256[package]
        found[package] = Path(path)
    return found


def test_the_shipped_contract_is_what_the_generator_derives(sdists: dict[str, Path]) -> None:
    generator = _generator()
    sources = {package: generator.read_sources(path, package) for package, path in sdists.items()}
    artifacts = {package: (path.name, SHA256[package]) for package, path in sdists.items()}
    derived = generator.document(generator.derive(sources), artifacts)
    assert json.dumps(derived, indent=1) + "\n" == SHIPPED.read_text(encoding="utf-8")


def test_kinds_match_the_enum() -> None:
    assert {entry["kind"] for entry in derived_families().values()} <= {k.value for k in Kind}
