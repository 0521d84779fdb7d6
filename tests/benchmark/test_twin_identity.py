"""The aggregated twin must serve what the DPD endpoint serves (audit B9): its InferenceEndpointConfig is compared
with the endpoint's, any difference is stated beside the A/B, and a twin of another model gets no verdict.

The live case runs the real ``bench --aggregated`` against the recorded cluster of test_server_truth.py (the stub
runs replayed, no new client run), whose InferenceEndpointConfigs here carry the manifests the project renders.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support import load_module, write_spec

from hyperpod_dpd.benchmark.run.twin_identity import identity_differences, refusal
from hyperpod_dpd.charts import render_inference_endpoint_config
from hyperpod_dpd.charts.aggregated import render_aggregated_endpoint_config
from hyperpod_dpd.spec.defaults import default_spec

truth = load_module("server_truth", Path(__file__).resolve().parent / "test_server_truth.py")


def _twin(**changes: Any) -> dict[str, Any]:
    """The default spec's twin as rendered, with ``modelLocation`` or ``args`` (appended) changed."""
    twin = render_aggregated_endpoint_config(default_spec())
    body = {**twin["spec"]}
    if "location" in changes:
        body["modelSourceConfig"] = {**body["modelSourceConfig"], "modelLocation": changes["location"]}
    if "args" in changes:
        body["worker"] = {**body["worker"], "args": [*body["worker"]["args"], *changes["args"]]}
    return {**twin, "spec": body}


DPD = render_inference_endpoint_config(default_spec())


def test_a_twin_rendered_from_the_same_spec_differs_in_nothing() -> None:
    assert identity_differences(DPD, render_aggregated_endpoint_config(default_spec())) == []


def test_a_twin_of_another_checkpoint_or_quantization_refuses_the_ab() -> None:
    found = identity_differences(DPD, _twin(location="Llama-3.3-70B-Instruct-FP8", args=["--quantization", "fp8"]))
    assert [(d.what, d.changes_model) for d in found] == [("model source", True), ("engine flag --quantization", True)]
    assert found[0].dpd.endswith(":Llama-3.3-70B-Instruct") and found[0].twin.endswith("-FP8")
    assert found[1].render() == "engine flag --quantization: DPD (not set), twin fp8"
    assert refusal(found) is not None and "another model" in str(refusal(found))


def test_another_engine_flag_is_stated_but_does_not_refuse() -> None:
    found = identity_differences(DPD, _twin(args=["--max-num-seqs=64", "--enforce-eager"]))
    assert [d.render() for d in found] == ["engine flag --enforce-eager: DPD (not set), twin (set)",
                                           "engine flag --max-num-seqs: DPD (not set), twin 64"]
    assert refusal(found) is None


def test_an_unread_config_compares_nothing() -> None:
    assert identity_differences(DPD, {"status": {"selector": "app=x"}}) == []


class _Configs:
    """The cluster's InferenceEndpointConfigs: the rendered manifests, with the operator's status selector."""

    def __init__(self, fakes: ModuleType, twin: dict[str, Any]) -> None:
        self.fakes, self.found = fakes, {"dpd-test": DPD, "dpd-test-agg": twin}

    def get_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str) -> Any:
        return {**self.found[name], "status": {"selector": self.fakes.twin_selector(name)}}


@pytest.fixture
def spec(tmp_path: Path) -> str:
    return write_spec(tmp_path, ("threshold: 4096", "threshold: 32"))


def _ab(capsys: pytest.CaptureFixture[str], fakes: ModuleType, healthy_run: Any, spec: str,
        twin: dict[str, Any], *flags: str) -> tuple[int, str]:
    kube = truth.ab_cluster(fakes, healthy_run, custom=_Configs(fakes, twin))
    code, out, _ = truth.bench(capsys, kube, spec, *truth.TRAFFIC, "--aggregated", *flags)
    return code, out


def test_a_live_ab_against_an_fp8_twin_is_flagged_and_has_no_verdict(capsys: pytest.CaptureFixture[str],
                                                                      fakes: ModuleType, healthy_run: Any,
                                                                      spec: str) -> None:
    """Audit B9: the twin's config names an ``-FP8`` location. Before: trusted, exit 0, no word of it. Now every twin
    level is twin-differs (exit 1), the buyer table states the difference and gives no verdict."""
    fp8 = _twin(location="Llama-3.3-70B-Instruct-FP8")
    code, out = _ab(capsys, fakes, healthy_run, spec, fp8, "--json")
    document = json.loads(out)
    flagged = [w for w in document["runs"]["aggregated"]["warnings"] if w["code"] == "twin-differs"]
    served = [side["spec"]["modelSourceConfig"]["modelLocation"] for side in (fp8, DPD)]
    print(f"bench: exit {code}, {len(flagged)} twin-differs warnings; truth: the twin serves {served[0]}, "
          f"DPD {served[1]}")
    assert code == 1 and [w["concurrency"] for w in flagged] == [2, 4]
    assert "Llama-3.3-70B-Instruct-FP8" in flagged[0]["message"] and "no verdict" in flagged[0]["message"]
    assert document["ab_buyer"]["twin_differences"][0]["what"] == "model source"
    verdicts = {m["verdict"] for level in document["ab_buyer"]["levels"] for m in level["metrics"]}
    assert verdicts == {"no verdict: the twin serves another model"}
    _, text = _ab(capsys, fakes, healthy_run, spec, fp8)
    assert "the twin differs from DPD: model source: DPD s3:" in text


def test_a_live_ab_against_the_same_spec_twin_says_nothing_of_identity(capsys: pytest.CaptureFixture[str],
                                                                         fakes: ModuleType, healthy_run: Any,
                                                                         spec: str) -> None:
    _, out = _ab(capsys, fakes, healthy_run, spec, render_aggregated_endpoint_config(default_spec()), "--json")
    document = json.loads(out)
    assert not [w for w in document["runs"]["aggregated"]["warnings"] if w["code"] == "twin-differs"]
    assert document["ab_buyer"]["twin_differences"] == []
