"""The spec's engine flags as AIConfigurator inputs (or refused), and the node price table."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources

import pytest

from hyperpod_dpd.advisor import Advice
from hyperpod_dpd.advisor.engine import DEFAULT_MAX_NUM_BATCHED_TOKENS, EngineSettings, engine_settings
from hyperpod_dpd.contracts.prices import PRICE_FILE, node_price
from hyperpod_dpd.errors import SpecError
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.instances import InstanceType


def test_default_spec_is_bf16_with_vllms_default_budget() -> None:
    assert engine_settings(default_spec()) == EngineSettings(max_num_batched_tokens=DEFAULT_MAX_NUM_BATCHED_TOKENS)


def test_fp8_and_budget_map_to_aiconfigurator_inputs() -> None:
    spec = replace(default_spec(), args=("--quantization", "fp8", "--kv-cache-dtype=fp8_e4m3",
                                         "--max-num-batched-tokens", "2048"))
    assert engine_settings(spec) == EngineSettings(gemm_quant_mode="fp8", kvcache_quant_mode="fp8",
                                                   max_num_batched_tokens=2048)


@pytest.mark.parametrize(("args", "named"), [
    (("--quantization", "awq"), "--quantization awq"),
    (("--kv-cache-dtype", "fp8_e5m2"), "--kv-cache-dtype fp8_e5m2"),
    (("--pipeline-parallel-size", "2"), "--pipeline-parallel-size 2"),
    (("--dtype", "float32"), "--dtype float32"),
    (("--max-num-batched-tokens", "lots"), "--max-num-batched-tokens lots"),
])
def test_flags_it_cannot_model_are_refused_by_name(args: tuple[str, ...], named: str) -> None:
    with pytest.raises(SpecError) as caught:
        engine_settings(replace(default_spec(), args=args))
    assert [p.value for p in caught.value.problems] == [named]


def test_roles_with_different_quantization_are_refused() -> None:
    spec = default_spec()
    spec = replace(spec, decode=replace(spec.decode, args=("--quantization", "fp8")))
    with pytest.raises(SpecError) as caught:
        engine_settings(spec)
    assert caught.value.problems[0].field == "decode.args"


def test_harmless_flags_pass() -> None:
    spec = replace(default_spec(), args=("--pipeline-parallel-size", "1", "--enable-prefix-caching"))
    assert engine_settings(spec) == EngineSettings()


def test_price_table_gives_kind_source_region_and_date_per_type() -> None:
    table = json.loads(resources.files("hyperpod_dpd.data").joinpath(PRICE_FILE).read_text(encoding="utf-8"))
    assert table["currency"] == "USD"
    assert set(table["prices"]) | set(table["unpriced"]) == {member.facts.name for member in InstanceType}
    price = node_price(InstanceType.P5_48XLARGE)
    assert price is not None and price.usd_per_node_hour == table["prices"]["ml.p5.48xlarge"]["usd_per_node_hour"]
    assert price.kind == "sagemaker-ml" and price.region and price.date
    # One basis: H200 has no published SageMaker rate, so it is EC2's at p5's SageMaker-to-EC2 ratio, labelled.
    h200 = node_price(InstanceType.P5EN_48XLARGE)
    p5_entry, p5en_entry = table["prices"]["ml.p5.48xlarge"], table["prices"]["ml.p5en.48xlarge"]
    ratio = p5_entry["usd_per_node_hour"] / p5_entry["ec2_list"]["usd_per_node_hour"]
    assert h200 is not None and h200.kind == "derived"
    assert h200.usd_per_node_hour == pytest.approx(p5en_entry["ec2_list"]["usd_per_node_hour"] * ratio, abs=0.01)
    assert "derived, not a published price" in h200.describe() and "x 1.15" in h200.describe()
    assert node_price(InstanceType.P6_B300_48XLARGE) is None


def test_advice_json_names_the_price_kind(blog_advice: Advice) -> None:
    price = blog_advice.to_json()["price"]
    assert isinstance(price, dict) and price["kind"] == "sagemaker-ml" and price["region"] == "us-west-2"
    assert all(p.disaggregated.usd_per_million_output_tokens and p.aggregated.usd_per_million_output_tokens
               for p in blog_advice.points)


def test_the_users_rate_is_labelled_as_such() -> None:
    price = node_price(InstanceType.P5_48XLARGE, override=40.0)
    assert price is not None and price.describe() == "$40.00 per node-hour (your rate: --price-per-node-hour)"


@pytest.mark.parametrize("bad", [0.0, -3.0, float("nan"), float("inf")])
def test_price_override_must_be_a_positive_number(bad: float) -> None:
    with pytest.raises(SpecError) as caught:
        node_price(InstanceType.P5_48XLARGE, override=bad)
    assert caught.value.problems[0].field == "price_per_node_hour"
    assert node_price(InstanceType.P5_48XLARGE, override=12.5) is not None
