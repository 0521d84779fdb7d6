"""Properties: any valid spec renders CRD-valid output; anything invalid raises SpecError, nothing else."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_dpd import (
    ByteSize,
    DpdSpec,
    FsxSource,
    HuggingFaceSource,
    InstanceType,
    KvCacheSpec,
    ModelSpec,
    Resources,
    RoleSpec,
    RoutingSpec,
    RoutingStrategy,
    S3Source,
    SpecError,
    VolumeSource,
    check,
    dump_spec,
    parse_spec,
)
from hyperpod_dpd.charts import render_inference_endpoint_config
from hyperpod_dpd.spec import AutoscalingSpec, MetricsSpec, SloScaling, SloSpec
from hyperpod_dpd.spec.loading import parse_spec_leniently
from hyperpod_dpd.spec.schema import spec_json_schema

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

label = st.from_regex(r"\A[a-z][a-z0-9]{0,10}\Z")
sources = st.one_of(
    st.builds(S3Source, bucket=st.from_regex(r"\A[a-z0-9][a-z0-9-]{2,20}[a-z0-9]\Z"),
              prefix=st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._/-]{0,30}\Z"),
              region=st.sampled_from(["us-east-1", "us-west-2", "eu-north-1"])),
    st.builds(FsxSource, file_system_id=st.from_regex(r"\Afs-[0-9a-f]{17}\Z"), path=st.just("models")),
    st.builds(HuggingFaceSource, model_id=st.from_regex(r"\A[a-z]{1,8}/[A-Za-z0-9.-]{1,12}\Z"),
              revision=st.one_of(st.none(), st.from_regex(r"\A[0-9a-f]{40}\Z"))),
    st.builds(VolumeSource, claim_name=label),
)
# Flags valid in either place, written as users do (abbreviated, underscores); the KV-layout flag only
# in the shared args.
role_flags = st.lists(st.sampled_from(["--enforce-eager", "--enable-chunked-prefill", "--no-enable-log-requests",
                                       "--max_num_batched_tokens=8192", "--enable-prefix-cach"]),
                      unique=True, max_size=3).map(tuple)
shared_flags = st.lists(st.sampled_from([("--enforce-eager",), ("--block-size=16",), ("--kv-cache-dtype", "fp8")]),
                        unique=True, max_size=2).map(lambda groups: tuple(t for group in groups for t in group))


@st.composite
def valid_specs(draw: st.DrawFn) -> DpdSpec:
    instance = draw(st.sampled_from(list(InstanceType)))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    max_len = draw(st.integers(min_value=2048, max_value=32768))

    def role(decode: bool) -> RoleSpec:
        return RoleSpec(
            replicas=1 if decode else draw(st.integers(1, 4)),
            resources=Resources(gpus=tp, efa=draw(st.one_of(st.none(), st.integers(0, instance.facts.efa_devices))),
                                cpu=draw(st.one_of(st.none(), st.sampled_from(["8", "48", "88", "1500m"]))),
                                memory=draw(st.one_of(st.none(), st.sampled_from(["64Gi", "512Gi", "1Ti"])))),
            gpu_memory_utilization=draw(st.one_of(st.none(), st.floats(0.5, 0.95))),
            max_num_seqs=draw(st.one_of(st.none(), st.integers(1, 256))),
            args=draw(role_flags),
        )

    # Model names that match no preset, so sizing needs no architecture and any TP is allowed.
    model = ModelSpec(name=draw(st.from_regex(r"\Acustom-[a-z0-9]{1,12}\Z")), source=draw(sources))
    prefill, decode = role(False), role(True)
    slo_scaled: dict[str, Any] = {}
    if draw(st.booleans()):  # SLO autoscaling on both roles, capacities pinned (synth's advisor pins them)
        def scaled(spec: RoleSpec, maximum: int) -> RoleSpec:
            slo = SloScaling(capacity_tokens_per_s=draw(st.floats(1, 1e6)), start_up_seconds=draw(st.floats(0, 3600)),
                             utilisation=draw(st.floats(0.05, 1)))
            return dataclasses.replace(spec, autoscaling=AutoscalingSpec(max_replicas=maximum, slo=slo))

        prefill, decode = scaled(prefill, 4), scaled(decode, draw(st.integers(1, 3)))
        slo_scaled = {"slo": SloSpec(ttft_ms=draw(st.integers(100, 10000)), tpot_ms=draw(st.integers(10, 200))),
                      "metrics": MetricsSpec(amp_workspace_url="https://aps-workspaces.us-west-2.amazonaws.com/"
                                                               "workspaces/ws-1234abcd")}
    return DpdSpec(
        name=draw(label), namespace=draw(label), model=model, instance_type=instance, tensor_parallel_size=tp,
        max_model_len=max_len, gpu_memory_utilization=draw(st.floats(0.3, 0.95)),
        prefill=prefill, decode=decode, **slo_scaled,
        routing=RoutingSpec(threshold=draw(st.integers(0, max_len)),
                            strategy=draw(st.sampled_from([RoutingStrategy.PREFIX_AWARE, RoutingStrategy.ROUND_ROBIN,
                                                           RoutingStrategy.SESSION]))),
        kv_cache=KvCacheSpec(pd_buffer_size=ByteSize.gibibytes(draw(st.sampled_from([8, 16, 32])))),
        args=draw(shared_flags),
    )


@SETTINGS
@given(spec=valid_specs())
def test_any_valid_spec_renders_crd_valid_output(spec: DpdSpec, crd_errors: Callable[[dict[str, Any]], list[str]]
                                                 ) -> None:
    document = render_inference_endpoint_config(spec)
    assert crd_errors(document) == []
    assert document["spec"]["pdSpec"]["prefillSpec"]["replicas"] == spec.prefill.replicas


# Each mutation makes a valid spec invalid in one way.
MUTATIONS = [
    lambda s: dataclasses.replace(s, prefill=dataclasses.replace(s.prefill, replicas=0)),
    lambda s: dataclasses.replace(s, name=s.name.upper() + "_"),
    lambda s: dataclasses.replace(s, routing=dataclasses.replace(s.routing, threshold=-1)),
    lambda s: dataclasses.replace(s, tensor_parallel_size=9),
    lambda s: dataclasses.replace(s, kv_cache=dataclasses.replace(s.kv_cache, hash_seed="random")),
    lambda s: dataclasses.replace(s, decode=dataclasses.replace(s.decode, args=(*s.decode.args, "--dtype", "half"))),
    lambda s: dataclasses.replace(s, args=(*s.args, "--gpu-memory-util", "0.9")),
    lambda s: dataclasses.replace(s, args=(*s.args, "-pp", "2")),
    lambda s: dataclasses.replace(s, args=(*s.args, "--port", "1")),
    lambda s: dataclasses.replace(s, gpu_memory_utilization=0.0),
    lambda s: dataclasses.replace(s, decode=dataclasses.replace(s.decode, env={"X": "1"})),
    lambda s: dataclasses.replace(s, max_model_len="long"),
    lambda s: dataclasses.replace(s, instance_type="ml.g5.48xlarge"),
]


@SETTINGS
@given(spec=valid_specs(), mutation=st.sampled_from(MUTATIONS))
def test_any_invalid_spec_raises_the_library_error(spec: DpdSpec, mutation: Callable[[DpdSpec], DpdSpec]) -> None:
    broken = mutation(spec)
    try:
        render_inference_endpoint_config(broken)
    except SpecError as err:
        assert err.problems
        assert all(p.fix for p in err.problems)
    else:
        raise AssertionError("an invalid spec rendered")


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 70000), st.floats(allow_nan=False), st.text(max_size=12)),
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(st.text(max_size=12), children,
                                                                                max_size=4)),
    max_leaves=12,
)


@st.composite
def perturbed_mappings(draw: st.DrawFn) -> Any:
    """The default spec's mapping with a few keys replaced by arbitrary JSON values, or pure noise."""
    from hyperpod_dpd.spec.defaults import default_spec

    if draw(st.booleans()):
        return draw(json_values)
    data: dict[str, Any] = dump_spec(default_spec())
    for _ in range(draw(st.integers(1, 3))):
        section = draw(st.sampled_from(sorted(data)))
        if isinstance(data[section], dict) and data[section] and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(data[section])))
            data[section] = {**data[section], key: draw(json_values)}
        else:
            data[section] = draw(json_values)
    return data


@SETTINGS
@given(data=perturbed_mappings())
def test_arbitrary_input_gives_a_spec_or_the_library_error(data: Any) -> None:
    try:
        spec = parse_spec(data)
        check(spec)
    except SpecError as err:
        assert err.problems
        assert str(err).startswith("invalid DPD spec")


SCHEMA = jsonschema.Draft7Validator(spec_json_schema())


@SETTINGS
@given(spec=valid_specs())
def test_the_editor_schema_accepts_any_valid_spec(spec: DpdSpec) -> None:
    assert [e.message for e in SCHEMA.iter_errors(dump_spec(spec))] == []


@SETTINGS
@given(data=perturbed_mappings())
def test_the_editor_schema_accepts_whatever_the_loader_reads(data: Any) -> None:
    _, problems = parse_spec_leniently(data)
    if not problems:
        assert [e.message for e in SCHEMA.iter_errors(data)] == []
