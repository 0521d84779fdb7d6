"""The nodes and what the pods ask of them: instance type, GPUs, EFA, CPU, memory, replicas and placement.

See ``docs/checks.md`` for what is checked and why.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from hyperpod_dpd.contracts.aws_names import MAX_INSTANCE_COUNT, label_value_error, qualified_name_error
from hyperpod_dpd.contracts.operator import DECODE_DEPLOYMENTS
from hyperpod_dpd.contracts.zones import AZ_NAME, zone_settings
from hyperpod_dpd.errors import SpecWarning
from hyperpod_dpd.spec import Resources, S3Source
from hyperpod_dpd.spec.architecture import (
    PRESETS,
    ModelArchitecture,
    preset_for_model_name,
    unsizable_reason_for_model_name,
)
from hyperpod_dpd.spec.units import format_bytes, parse_quantity
from hyperpod_dpd.validation.context import Finding, RuleContext, is_token, problem
from hyperpod_dpd.validation.engine import effective_flags

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


def _resources(field: str, res: Resources, ctx: RuleContext) -> Iterator[Finding]:
    facts = ctx.spec.instance_type.facts
    if res.gpus is not None and not 1 <= res.gpus <= facts.gpus:
        yield problem(f"{field}.gpus", res.gpus, f"must be between 1 and the {facts.gpus} GPUs of one "
                      f"{facts.name}", f"request at most {facts.gpus} GPUs per pod")
    if res.efa is not None and not 0 <= res.efa <= facts.efa_devices:
        yield problem(f"{field}.efa", res.efa, f"exceeds the {facts.efa_devices} EFA devices of one {facts.name}",
                      f"request at most {facts.efa_devices}")
    limits = (("cpu", res.cpu, facts.allocatable_cpus(), "CPUs a node with one thread per core leaves pods"),
              ("memory", res.memory, facts.memory_gib * 2**30, "bytes"))
    for name, text, capacity, unit in limits:
        if text is None:
            continue
        try:
            amount = parse_quantity(text)
        except ValueError:
            yield problem(f"{field}.{name}", text, "is not a Kubernetes quantity",
                          "write e.g. '96' or '1500m' for CPU, '1024Gi' for memory")
            continue
        if amount <= 0 or amount > capacity:
            yield problem(f"{field}.{name}", text, f"must be positive and fit one {facts.name} "
                          f"({capacity} {unit}), or the pod never schedules", "request less")


def hardware(ctx: RuleContext) -> Iterator[Finding]:
    spec = ctx.spec
    facts = spec.instance_type.facts
    tp = spec.tensor_parallel_size
    if not 1 <= tp <= facts.gpus:
        yield problem("tensor_parallel_size", tp, f"must be between 1 and the {facts.gpus} GPUs of one {facts.name}",
                      f"use at most {facts.gpus}; DPD runs each role inside one node")
    for role_name, role in spec.roles():
        yield from _resources(f"{role_name}.resources", role.resources, ctx)
        gpus = spec.role_gpus(role)
        if 1 <= gpus < tp <= facts.gpus:
            yield problem(f"{role_name}.resources.gpus", gpus, f"is fewer than tensor_parallel_size {tp}; vLLM "
                          "needs one GPU per tensor-parallel rank", f"request {tp} GPUs or lower tensor_parallel_size")
        elif tp <= gpus <= facts.gpus and gpus > tp:
            yield SpecWarning(code="GpusIdle", field=f"{role_name}.resources.gpus",
                          message=f"{gpus} GPUs requested but tensor parallelism uses {tp}; {gpus - tp} stay idle")
    if spec.worker_resources is not None:
        yield from _resources("worker_resources", spec.worker_resources, ctx)
    yield from host_memory(ctx)
    arch = ctx.architecture
    if arch is None:
        yield architecture_unknown(ctx)
    else:
        yield from _architecture_mismatch(ctx, arch)
    if arch is not None and tp >= 1:
        if arch.num_attention_heads % tp:
            yield problem("tensor_parallel_size", tp, f"does not divide the {arch.num_attention_heads} attention "
                          f"heads of {arch.name}", f"use a divisor of {arch.num_attention_heads}, such as "
                          f"{_largest_divisor(arch.num_attention_heads, facts.gpus)}")
        elif arch.num_kv_heads % tp and tp % arch.num_kv_heads:
            yield problem("tensor_parallel_size", tp, f"neither divides nor is a multiple of the {arch.num_kv_heads} "
                          f"KV heads of {arch.name}", f"use a divisor or multiple of {arch.num_kv_heads}")


def _gib_flag(value: str | None) -> float:
    """A GiB flag's value; 0 for unset or what the value rule already refuses."""
    try:
        amount = float(value) if value is not None else 0.0
    except ValueError:
        return 0.0
    return amount if math.isfinite(amount) and amount > 0 else 0.0


def pinned_host_memory(ctx: RuleContext, role_args: tuple[str, ...]) -> list[tuple[str, int]]:
    """The host memory one pod of a role allocates up front, by its source: ``[(what, bytes), ...]``.

    - LMCache's CPU cache: each rank's engine allocates ``max_local_cpu_size`` GiB when the PD backend runs with
      ``local_cpu`` (LMCache 0.4.3, lmcache/v1/storage_backend/__init__.py:156, local_cpu_backend.py:373);
    - vLLM's ``--cpu-offload-gb``: GiB per GPU (vllm/config/offload.py:23-24 in 0.19.0);
    - vLLM's ``--kv-offloading-size``: GiB summed over the TP ranks (vllm/config/cache.py:144-146).
    vLLM's own process memory comes on top; it is not counted, so a pod this refuses surely does not fit.
    """
    spec = ctx.spec
    ranks = spec.tensor_parallel_size
    values, _ = effective_flags(spec.args, role_args)
    parts: list[tuple[str, int]] = []
    if spec.kv_cache.l1_cache and spec.kv_cache.cpu_cache_size.bytes:
        parts.append((f"LMCache's CPU cache {spec.kv_cache.cpu_cache_size} x {ranks} ranks "
                      "(kv_cache.cpu_cache_size)", spec.kv_cache.cpu_cache_size.bytes * ranks))
    if offload := _gib_flag(values.get("--cpu-offload-gb")):
        parts.append((f"--cpu-offload-gb {offload:g} x {ranks} GPUs", int(offload * 2**30) * ranks))
    if kv_offload := _gib_flag(values.get("--kv-offloading-size")):
        parts.append((f"--kv-offloading-size {kv_offload:g}", int(kv_offload * 2**30)))
    return parts


def host_memory(ctx: RuleContext) -> Iterator[Finding]:
    """A pod's pinned host memory must fit its memory limit, and that of the pods one node holds the node.

    With tensor_parallel_size below the node's GPUs a role's pods share nodes (GPUs per node // GPUs per pod of
    them, at most the role's pods at its scale limit), and each pins its own host memory.
    """
    spec = ctx.spec
    facts = spec.instance_type.facts
    node = facts.memory_gib * 2**30
    usage = {r.role: r for r in spec.node_usage().roles}
    for role_name, role in spec.roles():
        parts = pinned_host_memory(ctx, role.args)
        need = sum(amount for _, amount in parts)
        if not need:
            continue
        breakdown = " + ".join(f"{what} = {format_bytes(amount)}" for what, amount in parts)
        limit_text = role.resources.memory
        try:
            limit = int(parse_quantity(limit_text)) if limit_text is not None else None
        except ValueError:
            limit = None  # refused by _resources already
        if limit is not None and need > limit:
            yield problem(f"{role_name}.resources.memory", limit_text,
                          f"is below the host memory each {role_name} pod allocates before vLLM's own: {breakdown}, "
                          f"{format_bytes(need)} in all, so the pod is OOM-killed when it starts",
                          f"raise {role_name}.resources.memory above {format_bytes(need)} (plus vLLM's process "
                          "memory), or lower kv_cache.cpu_cache_size or the offload flags")
        pods = usage[role_name].pods_per_node(facts.gpus)
        if need * pods > node:
            cached = spec.kv_cache.l1_cache and spec.kv_cache.cpu_cache_size.bytes > 0
            field, value = (("kv_cache.cpu_cache_size", str(spec.kv_cache.cpu_cache_size)) if cached
                            else (f"{role_name}.args", breakdown))
            who = (f"each {role_name} pod allocate" if pods == 1 else
                   f"the {pods} {role_name} pods one node holds ({facts.gpus} GPUs // "
                   f"{usage[role_name].gpus_per_pod} per pod) allocate")
            total = (f"{format_bytes(need)} in all" if pods == 1 else
                     f"{format_bytes(need)} per pod, {format_bytes(need * pods)} in all")
            yield problem(field, value, f"makes {who} more host memory than one {facts.name} has "
                          f"({format_bytes(node)}): {breakdown}, {total}",
                          "lower kv_cache.cpu_cache_size (it is per tensor-parallel rank) or the offload flags")


_SKIPPED = ("tensor_parallel_size divides the attention and KV heads, the weights and KV cache fit the GPUs "
            "(memory and KV sizing, the PD buffer) and max_model_len within the context window")


def architecture_unknown(ctx: RuleContext) -> SpecWarning:
    """``ArchitectureUnknown``: no preset, explicit shape or config.json, so the shape checks did not run.

    A model refused by name (MLA, sliding-window, hybrid) gets no fix: its config.json is refused as unsizable, and
    explicit dense fields would size it wrongly, so following a fix would turn a valid spec into an invalid one.
    """
    spec = ctx.spec
    chosen = spec.model.architecture
    reason = unsizable_reason_for_model_name(spec.model.name)
    if reason is not None:
        return SpecWarning(
            code="ArchitectureUnknown", field="model.architecture",
            message=f"model {spec.model.name!r} cannot be sized with the dense-attention formula ({reason}), so "
                    f"these checks cannot run for this architecture: {_SKIPPED}. No preset, explicit fields or "
                    "config.json describe it; check them against vLLM's startup log (its KV cache report)")
    why = (f"model.architecture {chosen!r} is not a preset" if isinstance(chosen, str)
           else f"no preset matches model name {spec.model.name!r} and model.architecture is not set")
    return SpecWarning(
        code="ArchitectureUnknown", field="model.architecture",
        message=f"{why}, so these checks were skipped: {_SKIPPED}. Fix: set model.architecture to a preset "
                f"({', '.join(PRESETS)}), to explicit fields (num_layers, hidden_size, num_attention_heads, "
                "num_kv_heads, head_dim, num_parameters), or to {config_json: PATH} (the model's config.json)")


_SHAPE = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "num_experts")


def _shape(arch: ModelArchitecture) -> str:
    return ", ".join(f"{key} {getattr(arch, key)}" for key in _SHAPE)


def _architecture_mismatch(ctx: RuleContext, arch: ModelArchitecture) -> Iterator[Finding]:
    """``ArchitectureMismatch``: a given shape that is not the one the model's name is published with."""
    spec = ctx.spec
    implied = preset_for_model_name(spec.model.name)
    if spec.model.architecture is None or implied is None or implied is arch:
        return
    if all(getattr(arch, key) == getattr(implied, key) for key in _SHAPE):
        return
    yield SpecWarning(
        code="ArchitectureMismatch", field="model.architecture",
        message=f"{arch.name} ({_shape(arch)}) is not the shape model name {spec.model.name!r} is published with "
                f"({implied.name}: {_shape(implied)}), and tensor parallelism, memory and KV sizing are checked "
                f"against the given shape. Fix: remove model.architecture to use {implied.name}, or correct "
                "model.name if the weights are another model's")


def _largest_divisor(number: int, cap: int) -> int:
    return max(d for d in range(1, cap + 1) if number % d == 0)


def roles(ctx: RuleContext) -> Iterator[Finding]:
    spec = ctx.spec
    for role_name, role in spec.roles():
        if role.replicas < 1:
            yield problem(f"{role_name}.replicas", role.replicas, "must be at least 1; DPD needs both roles",
                          "set 1 or more, or drop pdSpec for a colocated endpoint")
        if role.max_num_seqs is not None and role.max_num_seqs < 1:
            yield problem(f"{role_name}.max_num_seqs", role.max_num_seqs, "must be at least 1", "set 1 or more")
        nodes = spec.role_nodes(role)
        if nodes > MAX_INSTANCE_COUNT:
            scaled = role.autoscaling is not None and role.autoscaling.max_replicas >= role.replicas
            yield problem(f"{role_name}.autoscaling.max_replicas" if scaled else f"{role_name}.replicas",
                          role.autoscaling.max_replicas if scaled and role.autoscaling else role.replicas,
                          f"needs {nodes} {spec.instance_type.api_name} nodes in one instance group; SageMaker "
                          f"HyperPod allows at most {MAX_INSTANCE_COUNT} instances per group (InstanceCount)",
                          "ask for fewer replicas (your account's HyperPod quota is lower still: see Service Quotas)")
        for key, value in role.node_selector.items():
            key_error, value_error = qualified_name_error(key), label_value_error(value)
            if key_error is not None:
                yield problem(f"{role_name}.node_selector.{key}", key, f"is not a Kubernetes label key: it {key_error}",
                              "use a key such as 'example.com/pool' (prefix at most 253 characters, name at most 63)")
            elif value_error is not None:
                yield problem(f"{role_name}.node_selector.{key}", value, f"is not a Kubernetes label value: it "
                              f"{value_error}", "use at most 63 letters, digits, '-', '_' and '.'")
            elif key == INSTANCE_TYPE_LABEL and value != spec.instance_type.api_name:
                yield problem(f"{role_name}.node_selector.{key}", value, "contradicts instance_type "
                              f"{spec.instance_type.api_name}", "remove it or change instance_type")
        if role.env:
            seeds = {spec.kv_cache.hash_seed, spec.prefill.env.get("PYTHONHASHSEED", spec.kv_cache.hash_seed),
                     spec.decode.env.get("PYTHONHASHSEED", spec.kv_cache.hash_seed)}
            if "PYTHONHASHSEED" in role.env and len(seeds) > 1:
                yield problem(f"{role_name}.env.PYTHONHASHSEED", role.env["PYTHONHASHSEED"], "differs between the "
                              "roles; LMCache keys its cache with hash(), so prefill and decode would compute "
                              "different keys and every transfer would miss", "remove it; kv_cache.hash_seed sets one "
                              "seed for both roles")
            else:
                yield problem(f"{role_name}.env", dict(role.env), "the operator has no per-role environment "
                              "variables; both roles share worker.environmentVariables",
                              "move shared variables to env, and role-specific behaviour to args")
    if spec.decode.replicas > DECODE_DEPLOYMENTS:
        yield SpecWarning(code="SingleDecoder", field="decode.replicas",
                      message=f"{spec.decode.replicas} decode replicas requested, but the current operator runs one "
                              "decode deployment per endpoint; scale prefill replicas or raise "
                              "kv_cache.pd_buffer_size instead")


def idle_node_gpus(ctx: RuleContext) -> Iterator[Finding]:
    """Each role gets whole nodes of its own instance group; GPUs its pods leave free are paid for and idle."""
    spec = ctx.spec
    usage = spec.node_usage()
    if usage.gpus_used >= usage.gpus_provisioned or any(r.gpus_per_pod < 1 for r in usage.roles):
        return
    per_node = spec.instance_type.facts.gpus
    # More decoders are no fix while the operator runs one decode deployment (the SingleDecoder warning).
    fixes = [f"{r.role}.replicas up to {r.nodes * (per_node // r.gpus_per_pod)} (that many {r.gpus_per_pod}-GPU "
             f"pods fit on its {r.nodes} node{'s' if r.nodes != 1 else ''})"
             for r in usage.roles if r.gpus < r.nodes * per_node and r.gpus_per_pod <= per_node
             and not (r.role == "decode" and DECODE_DEPLOYMENTS == 1)]
    if spec.tensor_parallel_size < per_node:
        fixes.append(f"a larger tensor_parallel_size (up to {per_node})")
    smaller = sorted(t.api_name for t in type(spec.instance_type)
                     if t.facts.gpus < per_node and t.facts.gpu_model == spec.instance_type.facts.gpu_model)
    if smaller:
        fixes.append(f"an instance type with fewer GPUs ({', '.join(smaller)})")
    yield SpecWarning(code="NodeGpusIdle", field="instance_type",
                  message=f"{usage.summary()} ({usage.breakdown()}); {usage.gpus_provisioned - usage.gpus_used} "
                          f"GPUs are paid for and idle. Fix: {'; or '.join(fixes)}")


def topology(ctx: RuleContext) -> Iterator[Finding]:
    topo = ctx.spec.topology
    if not topo.same_az:
        yield SpecWarning(code="CrossAz", field="topology.same_az",
                      message="false lets prefill and decode land in different Availability Zones; EFA does not "
                              "cross zones, so KV transfers would fall back to TCP. Harmless in a single-AZ HyperPod "
                              "cluster (what this library's stack builds), costly otherwise")
    if topo.availability_zone is not None and not AZ_NAME.match(topo.availability_zone):
        yield problem("topology.availability_zone", topo.availability_zone, "is not an Availability Zone name",
                      "write e.g. 'us-west-2b'")
    source = ctx.spec.model.source
    own_region = source.region if isinstance(source, S3Source) and not is_token(source.region or "") else None
    for setting in zone_settings(ctx.spec):
        if own_region is not None and setting.region is not None and setting.region != own_region:
            yield SpecWarning(code="ZoneOutsideRegion", field=setting.field,
                          message=f"{setting.value!r} is in {setting.region}, but the spec's region "
                                  f"(model.source.s3.region) is {own_region}: pods pinned to a zone without "
                                  "HyperPod nodes never schedule. Fix: name a zone of the cluster's region, or "
                                  "leave it out (the stack already places every node in one zone)")
    if topo.placement_group is not None and not 1 <= len(topo.placement_group) <= 255:
        yield problem("topology.placement_group", topo.placement_group, "must be 1-255 characters",
                      "use the placement group's name")
