"""``plan`` and ``validate`` say how many nodes the spec creates and what they cost per hour, first."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support import write_spec

from hyperpod_dpd.cli import main
from hyperpod_dpd.contracts.prices import node_cost, price_table, table_price
from hyperpod_dpd.spec.autoscaling import AutoscalingSpec
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.instances import InstanceType

REPO = Path(__file__).resolve().parents[2]


def test_plan_prints_nodes_per_role_and_dollars_before_the_sizing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "nodes: prefill 1 x ml.p5.48xlarge, decode 1 x ml.p5.48xlarge = 2 nodes"
    assert lines[1].startswith("cost: $126.59/hour = 2 x $63.30 per node-hour (SageMaker ml.* on-demand rate, "
                               "us-west-2, 2026-09-12: ")
    assert lines.index(next(line for line in lines if line.startswith("DPD sizing plan"))) > 1


def test_plan_json_carries_the_cost_with_its_kind_and_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)["cost"]
    assert cost["nodes"] == 2 and cost["nodes_per_role"] == {"prefill": 1, "decode": 1}
    assert cost["instance_type"] == "ml.p5.48xlarge"
    assert cost["usd_per_hour"] == pytest.approx(2 * 63.296)
    assert cost["price"]["kind"] == "sagemaker-ml" and cost["price"]["region"] == "us-west-2"
    assert cost["price"]["date"] == "2026-09-12" and cost["price"]["source"]


def test_validate_prints_the_cost_before_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("nodes: prefill 1 x ml.p5.48xlarge, decode 1 x ml.p5.48xlarge = 2 nodes")
    assert lines[1].startswith("cost: $126.59/hour")
    assert lines[-1].endswith(": valid (0 warnings)")


def test_validate_json_has_the_cost_and_null_when_invalid(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cost"]["usd_per_hour"] == pytest.approx(126.592)
    bad = write_spec(tmp_path, ("tensor_parallel_size: 8", "tensor_parallel_size: 3"))
    assert main(["validate", str(bad), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["cost"] is None


def test_a_derived_figure_says_how_it_was_derived(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, ("instance_type: ml.p5.48xlarge", "instance_type: ml.p5en.48xlarge"))
    assert main(["plan", str(spec)]) == 0
    cost = capsys.readouterr().out.splitlines()[1]
    assert "$72.79 per node-hour (derived, not a published price, " in cost
    assert "dstack" in cost and "x 1.15" in cost


def test_a_type_without_a_sourced_price_says_so_and_invents_none() -> None:
    cost = node_cost(replace(default_spec(), instance_type=InstanceType.P5E_48XLARGE).node_usage())
    assert cost.usd_per_hour is None
    assert cost.lines()[1].startswith("cost: no price for ml.p5e.48xlarge (no public on-demand price")
    assert cost.to_json()["price"] is None and cost.to_json()["usd_per_hour"] is None


def test_an_autoscaled_role_costs_its_maximum_nodes() -> None:
    spec = default_spec()
    autoscaled = replace(spec, decode=replace(spec.decode, autoscaling=AutoscalingSpec(max_replicas=3)))
    cost = node_cost(autoscaled.node_usage())
    assert cost.to_json()["nodes_per_role"]["decode"] == 3
    assert cost.usd_per_hour == pytest.approx(4 * 63.296)


def test_every_instance_type_is_priced_with_provenance_or_listed_as_unpriced() -> None:
    table = price_table()
    names = {member.facts.name for member in InstanceType}
    assert set(table["prices"]) | set(table["unpriced"]) == names
    assert not set(table["prices"]) & set(table["unpriced"])
    for name in table["prices"]:
        price = table_price(name)
        assert price is not None and price.kind in table["kinds"]
        assert price.source and price.region and price.date and price.usd_per_node_hour > 0
        # One basis for every type (SageMaker's), so $/M tokens compare across GPUs; EC2's figure is kept beside.
        assert price.kind in ("sagemaker-ml", "derived"), name
        if price.kind == "derived":
            assert "x 1.15" in price.describe() and "ec2_list" in table["prices"][name]


def test_plan_and_validate_price_without_the_advisor_extra() -> None:
    code = ("import sys; sys.modules['aiconfigurator'] = None; sys.modules['aiconfigurator_core'] = None\n"
            "from hyperpod_dpd.cli import main\n"
            "assert main(['plan']) == 0 and main(['validate']) == 0\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": f"{REPO / 'k8s'}:{REPO / 'constructs'}", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("cost: $126.59/hour") == 2


def test_the_users_rate_replaces_the_table_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--price-per-node-hour", "70", "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)["cost"]
    assert cost["usd_per_hour"] == 140.0 and cost["price"]["kind"] == "user"
    assert main(["validate", "--price-per-node-hour", "70"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == ("cost: $140.00/hour = 2 x $70.00 per node-hour "
                                                       "(your rate: --price-per-node-hour)")


@pytest.mark.parametrize("bad", ["0", "-3", "nan", "inf", "cheap"])
def test_a_bad_rate_is_a_usage_error(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["plan", "--price-per-node-hour", bad])
    assert caught.value.code == 2
    assert "is not a positive number of US dollars" in capsys.readouterr().err
