"""The rules a DPD spec must satisfy, one function per concern. Each yields problems or warnings."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from hyperpod_dpd.architecture import PRESETS
from hyperpod_dpd.errors import Problem, Warning
from hyperpod_dpd.operator_names import router_service
from hyperpod_dpd.spec import (
    KNOWN_IMAGES,
    CloudWatchTrigger,
    FsxSource,
    HuggingFaceSource,
    PrometheusTrigger,
    Resources,
    RoutingStrategy,
    S3Source,
    VolumeSource,
)
from hyperpod_dpd.units import parse_quantity
from hyperpod_dpd.validation.check import Finding, RuleContext, register_rule
from hyperpod_dpd.vllm_args import parse_flags

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
# The CRD anchors modelName only at the start; the published example uses dots ("Llama-3.3-70B-Instruct").
MODEL_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$")
S3_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d+$")
AZ_NAME = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d+[a-z]$")
HF_MODEL_ID = re.compile(r"^[a-zA-Z0-9_.-]+/[a-zA-Z0-9_.-]+$")
COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")
FSX_ID = re.compile(r"^fs-[0-9a-f]{8,21}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
HTTP_PATH = re.compile(r"^/[a-zA-Z0-9\-_./]*$")
TLS_S3_URI = re.compile(r"^s3://([^/]+)/?(.*)$")
ACM_ARN = re.compile(r"^arn:aws:acm:[a-z0-9-]+:[0-9]{12}:certificate/[a-fA-F0-9-]+$")
DOMAIN = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")
AMP_WORKSPACE = re.compile(
    r"^https://aps-workspaces\.[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)*\.amazonaws\.com/workspaces/ws-[a-zA-Z0-9-]+$")

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

# Environment variables that spec fields own; setting them in ``env`` would fight the field.
OWNED_ENV = {
    "PD_BUFFER_SIZE": "kv_cache.pd_buffer_size",
    "PYTHONHASHSEED": "kv_cache.hash_seed",
    "LMCACHE_SAVE_DECODE_CACHE": "kv_cache.save_decode_cache",
}
# vLLM flags that spec fields own, and the field to set instead.
OWNED_FLAGS = {
    "--model": "model.mount_path (the operator mounts the weights there)",
    "--host": "nothing: the worker must listen on 0.0.0.0 for the sidecar and router",
    "--port": "port",
    "--tensor-parallel-size": "tensor_parallel_size",
    "--max-model-len": "max_model_len",
    "--gpu-memory-utilization": "gpu_memory_utilization (shared) or <role>.gpu_memory_utilization",
    "--max-num-seqs": "<role>.max_num_seqs",
    "--kv-transfer-config": "nothing: the operator wires LMCache and NIXL itself; remove the flag",
}


def is_token(value: str) -> bool:
    """An unresolved CDK token (a bucket or region known only at deploy time) is not checked here."""
    return "${Token[" in value


def problem(field: str, value: object, message: str, fix: str) -> Problem:
    return Problem(field=field, value=value, message=message, fix=fix)


def is_sagemaker_name(value: str) -> bool:
    """A SageMaker resource name (endpoint, HyperPod cluster or instance group): the pattern and 1-63
    characters (the pattern alone lets repeated hyphens run past 63)."""
    return len(value) <= 63 and SAGEMAKER_NAME.match(value) is not None


def _sagemaker_name(field: str, value: str) -> Iterator[Problem]:
    if not is_sagemaker_name(value):
        yield problem(field, value, "must be 1-63 letters, digits and hyphens, starting and ending with a letter or "
                      "digit", "rename it, e.g. 'llama-3-3-70b'")


@register_rule
def names(ctx: RuleContext) -> Iterator[Finding]:
    spec = ctx.spec
    if not DNS_1035_LABEL.match(spec.name) or len(spec.name) > 63:
        yield problem("name", spec.name, "must be a DNS label that starts with a letter: lower-case letters, digits "
                      "and '-', at most 63 characters (the router Service is named after it)",
                      "rename it, e.g. 'llama70b-dpd'")
    if not DNS_LABEL.match(spec.namespace) or len(spec.namespace) > 63:
        yield problem("namespace", spec.namespace, "must be a DNS label: lower-case letters, digits and '-', at most "
                      "63 characters", "use an existing namespace such as 'default'")
    service = router_service(spec)
    if len(service) > 63:
        yield problem("name", spec.name, f"with namespace {spec.namespace!r} makes the router Service name "
                      f"{service!r} {len(service)} characters long; Kubernetes allows 63",
                      f"shorten name and namespace by {len(service) - 63} characters together")
    if spec.endpoint_name is not None:
        yield from _sagemaker_name("endpoint_name", spec.endpoint_name)
    if not MODEL_NAME.match(spec.model.name):
        yield problem("model.name", spec.model.name, "must be 1-63 letters, digits, '.', '_' and '-', starting with a "
                      "letter or digit", "rename it, e.g. 'Llama-3.3-70B-Instruct'")
    for key, value in spec.tags.items():
        if not 1 <= len(key) <= 128 or len(value) > 256:
            yield problem(f"tags.{key}", value, "tag keys must be 1-128 characters and values at most 256",
                          "shorten the tag")


@register_rule
def model_source(ctx: RuleContext) -> Iterator[Finding]:
    model = ctx.spec.model
    source = model.source
    if isinstance(source, S3Source):
        if not is_token(source.bucket) and (not S3_BUCKET.match(source.bucket) or ".." in source.bucket):
            yield problem("model.source.s3.bucket", source.bucket, "is not a valid S3 bucket name",
                          "give the bare bucket name (3-63 lower-case letters, digits, '.' and '-'), without s3://")
        if not source.prefix or source.prefix.startswith(("/", "s3://")):
            yield problem("model.source.s3.prefix", source.prefix, "must be the key prefix of the weights inside the "
                          "bucket, without a leading '/' or s3://", "write e.g. 'Llama-3.3-70B-Instruct'")
        if source.region is not None and not is_token(source.region) and not REGION.match(source.region):
            yield problem("model.source.s3.region", source.region, "is not an AWS region name",
                          "write e.g. 'us-west-2'")
    elif isinstance(source, FsxSource):
        if not FSX_ID.match(source.file_system_id):
            yield problem("model.source.fsx.file_system_id", source.file_system_id, "is not an FSx file system id",
                          "write e.g. 'fs-0123456789abcdef0'")
    elif isinstance(source, HuggingFaceSource):
        if not HF_MODEL_ID.match(source.model_id):
            yield problem("model.source.huggingface.model_id", source.model_id, "must be 'owner/name'",
                          "write e.g. 'meta-llama/Llama-3.3-70B-Instruct'")
        if source.revision is not None and not COMMIT_SHA.match(source.revision):
            yield problem("model.source.huggingface.revision", source.revision, "must be a full 40-character "
                          "commit SHA (the operator pins by commit, not by branch or tag)",
                          "copy the commit SHA from the model repository's history")
        if source.token_secret is not None:
            secret = source.token_secret.split("/")
            if len(secret) != 2 or not DNS_LABEL.match(secret[0]) or not secret[1]:
                yield problem("model.source.huggingface.token_secret", source.token_secret,
                              "must be 'secret-name/key'", "write e.g. 'hf-token/token'")
    elif isinstance(source, VolumeSource) and not DNS_LABEL.match(source.claim_name):
        yield problem("model.source.volume.claim_name", source.claim_name, "must be the name of a "
                      "PersistentVolumeClaim (a DNS label)", "use the claim's name, e.g. 'llama-weights'")
    if not model.mount_path.startswith("/"):
        yield problem("model.mount_path", model.mount_path, "must be an absolute path", "write e.g. '/opt/ml/model'")
    if isinstance(model.architecture, str) and model.architecture not in PRESETS:
        yield problem("model.architecture", model.architecture, "is not a known preset",
                      f"use one of {', '.join(PRESETS)} or give the architecture's numbers")


def _resources(field: str, res: Resources, ctx: RuleContext) -> Iterator[Finding]:
    facts = ctx.spec.instance_type.facts
    if res.gpus is not None and not 1 <= res.gpus <= facts.gpus:
        yield problem(f"{field}.gpus", res.gpus, f"must be between 1 and the {facts.gpus} GPUs of one "
                      f"{facts.name}", f"request at most {facts.gpus} GPUs per pod")
    if res.efa is not None and not 0 <= res.efa <= facts.efa_devices:
        yield problem(f"{field}.efa", res.efa, f"exceeds the {facts.efa_devices} EFA devices of one {facts.name}",
                      f"request at most {facts.efa_devices}")
    limits = (("cpu", res.cpu, facts.vcpus, "vCPUs"), ("memory", res.memory, facts.memory_gib * 2**30, "bytes"))
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


@register_rule
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
            yield Warning(code="GpusIdle", field=f"{role_name}.resources.gpus",
                          message=f"{gpus} GPUs requested but tensor parallelism uses {tp}; {gpus - tp} stay idle")
    if spec.worker_resources is not None:
        yield from _resources("worker_resources", spec.worker_resources, ctx)
    arch = ctx.architecture
    if arch is not None and tp >= 1:
        if arch.num_attention_heads % tp:
            yield problem("tensor_parallel_size", tp, f"does not divide the {arch.num_attention_heads} attention "
                          f"heads of {arch.name}", f"use a divisor of {arch.num_attention_heads}, such as "
                          f"{_largest_divisor(arch.num_attention_heads, facts.gpus)}")
        elif arch.num_kv_heads % tp and tp % arch.num_kv_heads:
            yield problem("tensor_parallel_size", tp, f"neither divides nor is a multiple of the {arch.num_kv_heads} "
                          f"KV heads of {arch.name}", f"use a divisor or multiple of {arch.num_kv_heads}")


def _largest_divisor(number: int, cap: int) -> int:
    return max(d for d in range(1, cap + 1) if number % d == 0)


@register_rule
def roles(ctx: RuleContext) -> Iterator[Finding]:
    spec = ctx.spec
    for role_name, role in spec.roles():
        if role.replicas < 1:
            yield problem(f"{role_name}.replicas", role.replicas, "must be at least 1; DPD needs both roles",
                          "set 1 or more, or drop pdSpec for a colocated endpoint")
        if role.max_num_seqs is not None and role.max_num_seqs < 1:
            yield problem(f"{role_name}.max_num_seqs", role.max_num_seqs, "must be at least 1", "set 1 or more")
        for key, value in role.node_selector.items():
            if not LABEL_KEY.match(key) or not LABEL_VALUE.match(value):
                yield problem(f"{role_name}.node_selector.{key}", value, "is not a valid label key and value",
                              "use Kubernetes label syntax")
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
    if spec.decode.replicas > 1:
        yield Warning(code="SingleDecoder", field="decode.replicas",
                      message=f"{spec.decode.replicas} decode replicas requested, but the current operator runs one "
                              "decode deployment per endpoint; scale prefill replicas or raise "
                              "kv_cache.pd_buffer_size instead")


@register_rule
def engine(ctx: RuleContext) -> Iterator[Finding]:
    spec = ctx.spec
    if spec.max_model_len < 1:
        yield problem("max_model_len", spec.max_model_len, "must be positive", "set e.g. 16384")
    utilisations = [("gpu_memory_utilization", spec.gpu_memory_utilization)]
    utilisations += [(f"{name}.gpu_memory_utilization", role.gpu_memory_utilization)
                     for name, role in spec.roles() if role.gpu_memory_utilization is not None]
    for field, value in utilisations:
        if value is not None and not 0 < value <= 1:
            yield problem(field, value, "must be a fraction in (0, 1]", "use e.g. 0.75")
    if not 1 <= spec.port <= 65535:
        yield problem("port", spec.port, "must be a TCP port between 1 and 65535", "use e.g. 8000")
    if not spec.image.strip() or any(c.isspace() for c in spec.image):
        yield problem("image", spec.image, "must be a container image reference", "use e.g. " + KNOWN_IMAGES[0])
    elif spec.image not in KNOWN_IMAGES:
        yield Warning(code="UnknownImage", field="image",
                      message=f"{spec.image} is not one of the documented DPD images; it must bundle vLLM, LMCache, "
                              "NIXL and the EFA libfabric provider, or KV transfers fail")
    yield from _args("args", spec.args)
    for role_name, role in spec.roles():
        yield from _args(f"{role_name}.args", role.args)
    for key in spec.env:
        if key in OWNED_ENV:
            yield problem(f"env.{key}", spec.env[key], f"is set by {OWNED_ENV[key]}",
                          f"remove it from env and set {OWNED_ENV[key]}")
        elif not ENV_NAME.match(key):
            yield problem(f"env.{key}", key, "is not a valid environment variable name",
                          "use letters, digits and '_', not starting with a digit")


def _args(field: str, args: Sequence[str]) -> Iterator[Finding]:
    flags, stray = parse_flags(args)
    for token in stray:
        yield problem(field, token, "is a value with no flag before it", "pair it with its --flag or remove it")
    seen: set[str] = set()
    for flag in flags:
        if flag.name in OWNED_FLAGS:
            yield problem(field, " ".join(flag.tokens), "contradicts a spec field that sets this flag",
                          f"remove it and set {OWNED_FLAGS[flag.name]}")
        elif flag.name in seen:
            yield problem(field, flag.name, "is given twice", "keep one occurrence")
        seen.add(flag.name)


@register_rule
def routing(ctx: RuleContext) -> Iterator[Finding]:
    spec = ctx.spec
    threshold = spec.routing.threshold
    if not 0 <= threshold <= spec.max_model_len:
        yield problem("routing.threshold", threshold, f"must be between 0 (always disaggregate) and max_model_len "
                      f"{spec.max_model_len}; above it no prompt would ever reach the prefiller",
                      "use e.g. 4096, the documented default")
    path = spec.invocation_path
    if not path or path.startswith("/") or any(c.isspace() for c in path):
        yield problem("invocation_path", path, "is the path after http://host:port/, without a leading '/'",
                      "write e.g. 'v1/chat/completions'")
    if spec.routing.strategy is RoutingStrategy.KV_AWARE and (
            not path.endswith("completions") or path.endswith("chat/completions")):
        yield problem("routing.strategy", "kvaware", f"needs a 'completions' invocation path, but invocation_path is "
                      f"{path!r}", "use 'v1/completions', or strategy prefixaware for chat")
    if not HTTP_PATH.match(spec.health_check_path):
        yield problem("health_check_path", spec.health_check_path, "must be an absolute URL path",
                      "write e.g. '/health'")


@register_rule
def kv_cache(ctx: RuleContext) -> Iterator[Finding]:
    kv = ctx.spec.kv_cache
    if kv.hash_seed != "0":
        yield problem("kv_cache.hash_seed", kv.hash_seed, "must be \"0\": the operator's images and every documented "
                      "DPD setup use 0, and a mismatch makes every transfer miss ('Retrieved 0 out of N')",
                      "set hash_seed: \"0\"")
    if kv.chunk_tokens < 1:
        yield problem("kv_cache.chunk_tokens", kv.chunk_tokens, "must be positive", "use LMCache's default, 256")
    gpu_memory = ctx.spec.instance_type.facts.gpu_memory
    if not 0 < kv.pd_buffer_size.bytes < gpu_memory.bytes:
        yield problem("kv_cache.pd_buffer_size", str(kv.pd_buffer_size), f"must be positive and smaller than one "
                      f"GPU's {gpu_memory} on {ctx.spec.instance_type.api_name}", "use e.g. 8Gi, 16Gi or 32Gi")


@register_rule
def observability(ctx: RuleContext) -> Iterator[Finding]:
    metrics = ctx.spec.metrics
    if metrics.scrape_interval_seconds is not None and not 5 <= metrics.scrape_interval_seconds <= 300:
        yield problem("metrics.scrape_interval_seconds", metrics.scrape_interval_seconds, "must be 5-300",
                      "use e.g. 15")
    if metrics.model_metrics_port is not None and not 1024 <= metrics.model_metrics_port <= 65535:
        yield problem("metrics.model_metrics_port", metrics.model_metrics_port, "must be 1024-65535",
                      f"use the vLLM port, {ctx.spec.port}")
    if metrics.model_metrics_path is not None and not HTTP_PATH.match(metrics.model_metrics_path):
        yield problem("metrics.model_metrics_path", metrics.model_metrics_path, "must be an absolute URL path",
                      "use '/metrics'")


@register_rule
def tls(ctx: RuleContext) -> Iterator[Finding]:
    tls_spec = ctx.spec.tls
    if tls_spec is None:
        return
    uri = tls_spec.certificate_output_s3_uri
    if uri is not None and not is_token(uri) and not TLS_S3_URI.match(uri):
        yield problem("tls.certificate_output_s3_uri", uri, "must be an s3:// URI", "write s3://bucket/prefix")
    arn, domain = tls_spec.acm_certificate_arn, tls_spec.domain_name
    if (arn is None) != (domain is None):
        yield problem("tls.acm_certificate_arn" if arn is None else "tls.domain_name", arn or domain,
                      "a custom certificate needs both acm_certificate_arn and domain_name", "set both or neither")
    if arn is not None and not ACM_ARN.match(arn):
        yield problem("tls.acm_certificate_arn", arn, "is not an ACM certificate ARN",
                      "copy the ARN from ACM: arn:aws:acm:<region>:<account>:certificate/<id>")
    if domain is not None and (len(domain) > 253 or not DOMAIN.match(domain)):
        yield problem("tls.domain_name", domain, "is not a lower-case DNS name", "write e.g. 'llm.example.com'")


@register_rule
def topology(ctx: RuleContext) -> Iterator[Finding]:
    topo = ctx.spec.topology
    if not topo.same_az:
        yield problem("topology.same_az", False, "EFA does not cross Availability Zones, so KV transfers would fall "
                      "back to TCP (below 1 GB/s) and DPD would be slower than colocated serving",
                      "keep same_az: true")
    if topo.availability_zone is not None and not AZ_NAME.match(topo.availability_zone):
        yield problem("topology.availability_zone", topo.availability_zone, "is not an Availability Zone name",
                      "write e.g. 'us-west-2b'")
    if topo.placement_group is not None and not 1 <= len(topo.placement_group) <= 255:
        yield problem("topology.placement_group", topo.placement_group, "must be 1-255 characters",
                      "use the placement group's name")


@register_rule
def autoscaling(ctx: RuleContext) -> Iterator[Finding]:
    for role_name, role in ctx.spec.roles():
        scaling = role.autoscaling
        if scaling is None:
            continue
        field = f"{role_name}.autoscaling"
        if scaling.min_replicas < 0 or scaling.max_replicas < max(1, scaling.min_replicas):
            yield problem(field, f"{scaling.min_replicas}..{scaling.max_replicas}", "needs 0 <= min_replicas <= "
                          "max_replicas and max_replicas >= 1", "fix the bounds")
        for name, value in (("polling_interval_seconds", scaling.polling_interval_seconds),
                            ("cooldown_seconds", scaling.cooldown_seconds)):
            if value < 0:
                yield problem(f"{field}.{name}", value, "must not be negative", "use 0 or more seconds")
        if not scaling.triggers:
            yield problem(f"{field}.triggers", [], "autoscaling needs at least one trigger",
                          "add a cloudwatch or prometheus trigger, or remove autoscaling")
        yield from _triggers(field, scaling.triggers)
        if role_name == "decode" and scaling.max_replicas > 1:
            yield Warning(code="SingleDecoder", field=f"{field}.max_replicas",
                          message="the current operator runs one decode deployment per endpoint; scaling decode "
                                  "above 1 is unverified")


def _triggers(field: str, triggers: Sequence[CloudWatchTrigger | PrometheusTrigger]) -> Iterator[Finding]:
    names: set[str] = set()
    for i, trigger in enumerate(triggers):
        path = f"{field}.triggers[{i}]"
        if not DNS_LABEL.match(trigger.name):
            yield problem(f"{path}.name", trigger.name, "must be a DNS label", "use e.g. 'requests-per-pod'")
        if trigger.name in names:
            yield problem(f"{path}.name", trigger.name, "is used by another trigger", "give each trigger its own name")
        names.add(trigger.name)
        if trigger.target_value <= 0:
            yield problem(f"{path}.target_value", trigger.target_value, "must be positive", "set the per-pod target")
        if isinstance(trigger, PrometheusTrigger) and not AMP_WORKSPACE.match(trigger.server_address):
            yield problem(f"{path}.server_address", trigger.server_address, "must be an Amazon Managed Prometheus "
                          "workspace URL", "write https://aps-workspaces.<region>.amazonaws.com/workspaces/ws-<id>")
        if isinstance(trigger, CloudWatchTrigger) and trigger.period_seconds < 1:
            yield problem(f"{path}.period_seconds", trigger.period_seconds, "must be positive", "use e.g. 300")

