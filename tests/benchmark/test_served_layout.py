"""Bench audit B8: per-GPU, per-node-hour and $/Mtok divide by the pods bench counted serving, not the spec's layout.

Reproduced from the audit's recorded run (§4.9): the spec says 1 prefill and 1 decode pod of 8 GPUs (2 nodes,
16 GPUs); the cluster served with 2 decode pods (3 nodes, 24 GPUs) at $63.296 a node-hour, and C=4 gave 221.6
output tokens/s. bench printed 13.8 tok/s per GPU and $158.69 per million tokens; the truth is 9.2 and $238.0.
"""

from __future__ import annotations

import pytest

from hyperpod_dpd.benchmark.proof.disaggregation import DpdCounters, LevelDisaggregation
from hyperpod_dpd.benchmark.report.economics import layouts, served
from hyperpod_dpd.benchmark.session import counted_pods
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.spec.defaults import default_spec

PRICE = 63.296
TOKENS_PER_S = 221.6


def _decoder(external: int, prompt: int) -> str:
    source = 'source="external_kv_transfer"'
    return f"vllm:prompt_tokens_by_source_total{{{source}}} {external}\nvllm:prompt_tokens_total {prompt}\n"


def _level(decoders: int) -> LevelDisaggregation:
    before = DpdCounters.parse(["dpd_routing_disaggregated_total 0\n"],
                               {f"d{i}": _decoder(0, 0) for i in range(decoders)}, prefiller={"p0": ""})
    after = DpdCounters.parse(["dpd_routing_disaggregated_total 44\n"],
                              {f"d{i}": _decoder(96000, 96500) for i in range(decoders)}, prefiller={"p0": ""})
    return LevelDisaggregation.between(before, after, load=Load(concurrency=4))


def test_per_gpu_and_per_dollar_use_the_pods_that_served() -> None:
    spec = default_spec()
    assert (spec.prefill.replicas, spec.decode.replicas, spec.tensor_parallel_size) == (1, 1, 8)
    layout, _ = layouts(spec, price_per_node_hour=PRICE)
    counted = counted_pods({Load(concurrency=4): _level(decoders=2)})
    assert counted == {"decode": 2, "prefill": 1}
    truth = served(layout, counted)
    assert (layout.gpus, layout.nodes, truth.gpus, truth.nodes) == (16, 2, 24, 3)
    before, after = layout.per_gpu(TOKENS_PER_S), truth.per_gpu(TOKENS_PER_S)
    print(f"B8: tok/s per GPU bench before {before:.1f}, now {after:.1f}, truth 9.2; $/Mtok before "
          f"{layout.usd_per_million(TOKENS_PER_S):.2f}, now {truth.usd_per_million(TOKENS_PER_S):.2f}, truth 238.0")
    assert before == pytest.approx(13.85, abs=0.01) and after == pytest.approx(9.23, abs=0.01)
    assert truth.usd_per_million(TOKENS_PER_S) == pytest.approx(238.0, abs=0.1)
    assert truth.per_node_hour(TOKENS_PER_S) == pytest.approx(265_920, abs=1)
    assert "2 decode pods served where the spec says 1" in truth.describe()


def test_the_spec_layout_stands_when_the_counted_pods_match() -> None:
    layout, _ = layouts(default_spec(), price_per_node_hour=PRICE)
    assert served(layout, counted_pods({Load(concurrency=4): _level(decoders=1)})) is layout
    assert served(layout, {}) is layout
