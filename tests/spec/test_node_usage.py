"""One count of nodes and GPUs per role (``DpdSpec.node_usage``), and the warning when GPUs sit idle.

Before, a TP 1 spec bought a whole ml.p5.48xlarge per role and nothing said so (first-hour audit F1,
advisor audit F4): the stack, ``preflight`` and ``plan`` must count what the warning counts.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from support import write_spec

from hyperpod_dpd import DpdSpec, RoleSpec, check
from hyperpod_dpd.cli import main
from hyperpod_dpd.spec import AutoscalingSpec, CloudWatchTrigger
from hyperpod_dpd.spec.architecture import PRESETS


def _small(spec: DpdSpec, *, tp: int, prefill: int = 1, decode: int = 1) -> DpdSpec:
    """A small model, so any TP fits in memory and only the node count is under test."""
    return dataclasses.replace(spec, tensor_parallel_size=tp, prefill=RoleSpec(replicas=prefill),
                               decode=RoleSpec(replicas=decode), model=dataclasses.replace(
                                   spec.model, name="Llama-3.1-8B-Instruct", architecture="llama-3.1-8b"))


def test_the_audit_case_counts_3_of_16_gpus(spec: DpdSpec) -> None:
    usage = _small(spec, tp=1, prefill=2).node_usage()
    assert usage.summary() == "uses 3 of 16 GPUs on 2 ml.p5.48xlarge nodes"
    assert usage.breakdown() == "prefill 2 x 1 GPU on 1 node, decode 1 x 1 GPU on 1 node"
    assert [r.nodes for r in usage.roles] == [spec.role_nodes(r) for _, r in spec.roles()] == [1, 1]


def test_idle_gpus_are_a_warning_that_names_the_count_and_the_fix(spec: DpdSpec) -> None:
    assert "llama-3.1-8b" in PRESETS
    (warning,) = [w for w in check(_small(spec, tp=1, prefill=2)).warnings if w.code == "NodeGpusIdle"]
    assert warning.field == "instance_type"
    assert warning.message.startswith("uses 3 of 16 GPUs on 2 ml.p5.48xlarge nodes (prefill 2 x 1 GPU on 1 node, "
                                      "decode 1 x 1 GPU on 1 node); 13 GPUs are paid for and idle. Fix: ")
    assert "prefill.replicas up to 8" in warning.message
    assert "a larger tensor_parallel_size (up to 8)" in warning.message


def test_idle_gpus_never_recommend_the_decoders_single_decoder_warns_against(spec: DpdSpec) -> None:
    """The operator runs one decode deployment: NodeGpusIdle must not contradict SingleDecoder."""
    (warning,) = [w for w in check(_small(spec, tp=4)).warnings if w.code == "NodeGpusIdle"]
    assert "decode.replicas" not in warning.message
    assert "prefill.replicas up to 2" in warning.message
    more_decoders = check(_small(spec, tp=4, decode=2)).warnings
    assert "SingleDecoder" in {w.code for w in more_decoders}
    assert not any("decode.replicas up to" in w.message for w in more_decoders)
    assert "a larger tensor_parallel_size (up to 8)" in warning.message


def test_tp4_with_two_replicas_per_role_fills_its_nodes(spec: DpdSpec) -> None:
    assert "NodeGpusIdle" not in {w.code for w in check(_small(spec, tp=4, prefill=2, decode=2)).warnings}
    assert "NodeGpusIdle" in {w.code for w in check(_small(spec, tp=4)).warnings}


def test_the_default_spec_uses_every_gpu(spec: DpdSpec) -> None:
    usage = spec.node_usage()
    assert (usage.nodes, usage.gpus_used, usage.gpus_provisioned) == (2, 16, 16)


def test_an_autoscaled_role_counts_its_maximum(spec: DpdSpec) -> None:
    trigger = CloudWatchTrigger(name="q", namespace="AWS/SageMaker", metric_name="m", target_value=1.0)
    scaled = dataclasses.replace(spec, prefill=RoleSpec(replicas=1, autoscaling=AutoscalingSpec(
        min_replicas=1, max_replicas=3, triggers=(trigger,))))
    assert [r.nodes for r in scaled.node_usage().roles] == [3, 1]
    assert [r.nodes for r in scaled.node_usage(at_scale_limit=False).roles] == [1, 1]


def test_plan_prints_the_same_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_spec(tmp_path, ("tensor_parallel_size: 8", "tensor_parallel_size: 4"))
    assert main(["plan", path]) == 0
    out = capsys.readouterr().out
    assert ("nodes: prefill 1 x 4 GPUs on 1 node, decode 1 x 4 GPUs on 1 node; uses 8 of 16 GPUs on 2 "
            "ml.p5.48xlarge nodes") in out


def test_validate_warns_about_the_bucket_region_synth_needs(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """first-hour audit F11: validate said 'valid (0 warnings)', then synth refused the same file."""
    path = write_spec(tmp_path, ("      region: us-west-2\n", ""))
    assert main(["validate", path]) == 0
    err = capsys.readouterr().err
    assert "[BucketRegionUnset] model.source.s3.region" in err and "--region" in err
    assert main(["synth", path, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"invalid DPD spec in {path}" in err and "--region" in err


def test_a_zone_outside_the_specs_own_region_is_a_warning(spec: DpdSpec) -> None:
    """A spec alone has one region, its bucket's: a zone of another region there is flagged."""
    away = dataclasses.replace(spec, topology=dataclasses.replace(spec.topology, availability_zone="us-east-1a"),
                               decode=RoleSpec(node_selector={"topology.kubernetes.io/zone": "us-east-1b"}))
    found = [(w.code, w.field) for w in check(away).warnings if w.code == "ZoneOutsideRegion"]
    assert found == [("ZoneOutsideRegion", "topology.availability_zone"),
                     ("ZoneOutsideRegion", "decode.node_selector['topology.kubernetes.io/zone']")]
    home = dataclasses.replace(spec, topology=dataclasses.replace(spec.topology, availability_zone="us-west-2b"))
    assert "ZoneOutsideRegion" not in {w.code for w in check(home).warnings}
