"""The rules a DPD spec must satisfy, one function per concern. Each yields problems or warnings."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence

from hyperpod_dpd.contracts.operator import router_service
from hyperpod_dpd.contracts.vllm import VLLM_VERSION, Arity, Flag, Match, flag_values, parse_flags, vllm_flags
from hyperpod_dpd.contracts.zones import AZ_NAME, zone_settings
from hyperpod_dpd.errors import Problem, SpecWarning
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
from hyperpod_dpd.spec.architecture import PRESETS
from hyperpod_dpd.spec.units import parse_quantity
from hyperpod_dpd.validation.check import Finding, RuleContext, register_rule

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
# The CRD anchors modelName only at the start; the published example uses dots ("Llama-3.3-70B-Instruct").
MODEL_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$")
S3_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d+$")
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
# Flags that multiply vLLM's world size (TP x PP x prefill context parallel, vllm/config/parallel.py) or
# run data-parallel engines: the pods, the PD buffer sizing and LMCache's keys (world size and worker
# id) are all built for tensor parallelism alone, so anything but 1 is refused.
PARALLEL_FLAGS = {
    "--pipeline-parallel-size": "pipeline parallelism",
    "--prefill-context-parallel-size": "prefill context parallelism",
    "--data-parallel-size": "data parallelism",
    "--data-parallel-size-local": "data parallelism",
}
# Flags that change the KV cache's dtype or shape, or the token hashes LMCache keys chunks with: the
# prefiller and the decoder must agree on them, or every transfer misses ("Retrieved 0 out of N").
KV_LAYOUT_FLAGS = {
    "--kv-cache-dtype": "the KV cache's dtype",
    "--dtype": "the model dtype, which is the KV dtype when --kv-cache-dtype is auto",
    "--quantization": "the quantization method, which can set the KV dtype",
    "--block-size": "the KV block size",
    "--kv-cache-dtype-skip-layers": "which layers keep an unquantized KV cache",
    "--hf-overrides": "the model config, and with it layer and head counts",
    "--hf-config-path": "the model config, and with it layer and head counts",
    "--revision": "the model revision, and with it its config",
    "--code-revision": "the model code revision",
    "--tokenizer": "the tokenizer, whose token ids LMCache hashes into its keys",
    "--tokenizer-mode": "the tokenizer, whose token ids LMCache hashes into its keys",
    "--tokenizer-revision": "the tokenizer, whose token ids LMCache hashes into its keys",
    "--prefix-caching-hash-algo": "the hash that seeds the chain LMCache's chunk keys start from",
}
# Ports something else in the model pod may bind. The router's log sends both hops to <pod-ip>:8081
# (the operator's proxy container); 8080 is the CRD's default model-metrics port.
PROXY_PORT = 8081
METRICS_DEFAULT_PORT = 8080
# The text-generation routes vLLM 0.19.0 serves (vllm/entrypoints/openai/*/api_router.py,
# vllm/entrypoints/sagemaker/api_router.py, vllm/entrypoints/anthropic/api_router.py).
VLLM_GENERATION_ROUTES = ("v1/chat/completions", "v1/completions", "v1/responses", "v1/messages", "invocations")
MAX_HASH_SEED = 4294967295  # Python's PYTHONHASHSEED range
# The invocation path AWS prescribes for kvaware routing (the router, not vLLM, answers it).
KV_AWARE_ROUTE = "completions"


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
        # An empty prefix is weights at the bucket's root (modelLocation is a plain string in the CRD).
        if source.prefix.startswith(("/", "s3://")):
            yield problem("model.source.s3.prefix", source.prefix, "must be the key prefix of the weights inside the "
                          "bucket, without a leading '/' or s3://; leave it empty for weights at the bucket's root",
                          "write e.g. 'Llama-3.3-70B-Instruct'")
        if source.region is not None and not is_token(source.region) and not REGION.match(source.region):
            yield problem("model.source.s3.region", source.region, "is not an AWS region name",
                          "write e.g. 'us-west-2'")
        if source.region is None:
            yield SpecWarning(code="BucketRegionUnset", field="model.source.s3.region",
                          message="is not set: a CDK stack fills in its own region, but `hyperpod-dpd synth` needs "
                                  "it (or --region) to render the manifest. Fix: set region, e.g. 'us-west-2'")
    elif isinstance(source, FsxSource):
        if not FSX_ID.match(source.file_system_id):
            yield problem("model.source.fsx.file_system_id", source.file_system_id, "is not an FSx file system id",
                          "write e.g. 'fs-0123456789abcdef0'")
        if not source.path.strip("/") or source.path.startswith("/"):
            yield problem("model.source.fsx.path", source.path, "must be the folder of the weights relative to the "
                          "file system's root, without a leading '/' (every AWS example uses a relative "
                          "modelLocation; the operator mounts it as a sub-path)",
                          f"write e.g. {source.path.strip('/') or 'Llama-3.3-70B-Instruct'!r}")
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
            yield SpecWarning(code="GpusIdle", field=f"{role_name}.resources.gpus",
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
        yield SpecWarning(code="SingleDecoder", field="decode.replicas",
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
    elif spec.port == PROXY_PORT:
        yield problem("port", spec.port, "is the port of the operator's proxy container in the same pod (the "
                      "router sends requests to <pod-ip>:8081), so vLLM could not bind it", "use e.g. 8000")
    elif spec.port == METRICS_DEFAULT_PORT:
        yield SpecWarning(code="PortMayCollide", field="port",
                      message="8080 is the operator's default model-metrics port; whether anything else in the pod "
                              "binds it is undocumented, so 8000 is the safer choice")
    if not spec.image.strip() or any(c.isspace() for c in spec.image):
        yield problem("image", spec.image, "must be a container image reference", "use e.g. " + KNOWN_IMAGES[0])
    elif spec.image not in KNOWN_IMAGES:
        yield SpecWarning(code="UnknownImage", field="image",
                      message=f"{spec.image} is not one of the documented DPD images; it must bundle vLLM, LMCache, "
                              "NIXL and the EFA libfabric provider, or KV transfers fail")
    yield from _args("args", spec.args, shared=None)
    shared = flag_values(spec.args)
    per_role = {role_name: flag_values(role.args) for role_name, role in spec.roles()}
    for role_name, role in spec.roles():
        other = per_role["decode" if role_name == "prefill" else "prefill"]
        yield from _args(f"{role_name}.args", role.args, shared=shared, other=other)
    for key in spec.env:
        if key in OWNED_ENV:
            yield problem(f"env.{key}", spec.env[key], f"is set by {OWNED_ENV[key]}",
                          f"remove it from env and set {OWNED_ENV[key]}")
        elif not ENV_NAME.match(key):
            yield problem(f"env.{key}", key, "is not a valid environment variable name",
                          "use letters, digits and '_', not starting with a digit")


def _args(field: str, args: Sequence[str], *, shared: dict[str, str | None] | None,
          other: dict[str, str | None] | None = None) -> Iterator[Finding]:
    """Extra vLLM flags, read as vLLM 0.19.0 reads them; ``shared`` is None for the shared args.

    ``other`` holds the other role's flags: a KV-layout flag both roles set to the same value agrees.
    """
    flags, stray = parse_flags(args)
    for token in stray:
        yield problem(field, token, "is a value with no flag before it", "pair it with its --flag or remove it")
    seen: set[str] = set()
    for flag in flags:
        written = " ".join(flag.tokens)
        if flag.match is Match.UNKNOWN:
            yield _unknown_flag(field, flag)
            continue
        if flag.match is Match.AMBIGUOUS:
            shown = ", ".join(flag.candidates[:6]) + (", ..." if len(flag.candidates) > 6 else "")
            yield problem(field, flag.written, f"is an abbreviation vLLM {VLLM_VERSION} cannot resolve: it could be "
                          f"{len(flag.candidates)} flags ({shown})", "write the flag in full")
            continue
        arity = vllm_flags().flags.get(flag.name)
        if flag.value is None and arity in (Arity.ONE, Arity.MANY):
            yield problem(field, written, f"{flag.name} needs a value; vLLM exits with 'expected one argument'",
                          f"write {flag.name} <value>")
        if flag.inline_value and arity is Arity.NONE:
            yield problem(field, written, f"{flag.name} is a switch and takes no value; vLLM exits with "
                          "'ignored explicit argument'", f"write {flag.name} alone, or --no-{flag.name[2:]}"
                          if not flag.name.startswith("--no-") else f"write {flag.name} alone")
        if flag.name in OWNED_FLAGS:
            yield problem(field, written, "contradicts a spec field that sets this flag",
                          f"remove it and set {OWNED_FLAGS[flag.name]}")
        elif flag.name in PARALLEL_FLAGS and flag.key is None and flag.value != "1":
            yield problem(field, written, f"asks for {PARALLEL_FLAGS[flag.name]}: vLLM's world size becomes tensor x "
                          "pipeline x prefill-context parallel (times data-parallel engines), more GPUs than the pod "
                          "requests, and the PD buffer and LMCache's keys are sized for tensor parallelism alone",
                          "remove it; scale with tensor_parallel_size (up to one node's GPUs) or more prefill replicas")
        elif (shared is not None and flag.name in KV_LAYOUT_FLAGS
              and (flag.name not in shared or shared[flag.name] != flag.value)
              and (other is None or flag.name not in other or other[flag.name] != flag.value)):
            yield problem(field, written, f"sets {KV_LAYOUT_FLAGS[flag.name]} for one role only; prefill and decode "
                          "must agree on it, or the decoder never finds the KV the prefiller sent ('Retrieved 0 out "
                          "of N')", "move it to the shared args, which both roles get")
        elif flag.name in seen and flag.key is None:
            yield problem(field, flag.name, "is given twice", "keep one occurrence")
        seen.add(flag.name)


def _unknown_flag(field: str, flag: Flag) -> Problem:
    known = list(vllm_flags().flags) + list(vllm_flags().aliases)
    near = difflib.get_close_matches(flag.name, known, n=1, cutoff=0.6)
    fix = (f"did you mean {near[0]}?" if near else
           f"remove it; 'vllm serve --help=all' lists the flags of vLLM {VLLM_VERSION}")
    return problem(field, flag.written, f"is not a flag of vLLM {VLLM_VERSION}, the version the DPD images ship; "
                   "vLLM would exit with 'unrecognized arguments'", fix)


@register_rule
def routing(ctx: RuleContext) -> Iterator[Finding]:
    spec = ctx.spec
    threshold = spec.routing.threshold
    if threshold < 0:
        yield problem("routing.threshold", threshold, "must be 0 (always disaggregate) or more",
                      "use e.g. 4096, the documented default")
    elif threshold > spec.max_model_len > 0:
        yield SpecWarning(code="NoPromptReachesPrefiller", field="routing.threshold",
                      message=f"{threshold} is above max_model_len {spec.max_model_len}: no prompt reaches the "
                              "prefiller, so every request is served by the decoder alone")
    path = spec.invocation_path.lstrip("/")
    if not path or any(c.isspace() for c in path):
        yield problem("invocation_path", spec.invocation_path, "must be the path after http://host:port/",
                      "write e.g. 'v1/chat/completions'")
    elif path == KV_AWARE_ROUTE and spec.routing.strategy is RoutingStrategy.KV_AWARE:
        pass  # AWS prescribes invocationEndpoint /completions for kvaware (KV caching and routing page)
    elif path not in VLLM_GENERATION_ROUTES:
        message = (f"is not a text-generation route vLLM {VLLM_VERSION} serves ({', '.join(VLLM_GENERATION_ROUTES)})"
                   "; every request would get 404")
        if spec.image in KNOWN_IMAGES:
            yield problem("invocation_path", spec.invocation_path, message, "use 'v1/chat/completions' or "
                          "'v1/completions'")
        else:
            yield SpecWarning(code="UnknownRoute", field="invocation_path", message=f"{path!r} {message} (checked "
                          "because the image is not a documented DPD image; ignore if yours serves it)")
    if spec.routing.strategy is RoutingStrategy.KV_AWARE:
        yield SpecWarning(code="KvAwareUnverified", field="routing.strategy",
                      message="AWS documents kvaware for the completions API with vLLM images 0.19.1 or later "
                              f"(invocation_path here: {path!r}); the DPD images ship vLLM 0.19.0, and the DPD "
                              "guide recommends kvaware without that caveat. Verify cache hits on your cluster, or "
                              "use prefixaware")
    if not HTTP_PATH.match(spec.health_check_path):
        yield problem("health_check_path", spec.health_check_path, "must be an absolute URL path",
                      "write e.g. '/health'")


@register_rule
def kv_cache(ctx: RuleContext) -> Iterator[Finding]:
    kv = ctx.spec.kv_cache
    if not (kv.hash_seed.isascii() and kv.hash_seed.isdigit() and int(kv.hash_seed) <= MAX_HASH_SEED):
        yield problem("kv_cache.hash_seed", kv.hash_seed, f"must be an integer from 0 to {MAX_HASH_SEED} "
                      "(PYTHONHASHSEED): LMCache keys chunks with hash(), and 'random' or an unset seed gives each "
                      "process its own keys, so every transfer misses ('Retrieved 0 out of N')",
                      "set hash_seed: \"0\", as AWS documents")
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
    if metrics.enabled and metrics.model_metrics_port is None and 1 <= ctx.spec.port < 1024:
        yield problem("port", ctx.spec.port, "is where the operator scrapes vLLM's /metrics, and the CRD's "
                      "metrics port must be 1024-65535", "use e.g. 8000, or set metrics.enabled: false")
    if metrics.model_metrics_port is not None and not 1024 <= metrics.model_metrics_port <= 65535:
        yield problem("metrics.model_metrics_port", metrics.model_metrics_port, "must be 1024-65535",
                      f"use the vLLM port, {ctx.spec.port}")
    elif metrics.model_metrics_port is not None and metrics.model_metrics_port != ctx.spec.port:
        yield SpecWarning(code="MetricsPortDiffers", field="metrics.model_metrics_port",
                      message=f"{metrics.model_metrics_port} is not port {ctx.spec.port}, where vLLM serves /metrics; "
                              "the operator would scrape a port nothing serves metrics on (leave it unset)")
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
def idle_node_gpus(ctx: RuleContext) -> Iterator[Finding]:
    """Each role gets whole nodes of its own instance group; GPUs its pods leave free are paid for and idle."""
    spec = ctx.spec
    usage = spec.node_usage()
    if usage.gpus_used >= usage.gpus_provisioned or any(r.gpus_per_pod < 1 for r in usage.roles):
        return
    per_node = spec.instance_type.facts.gpus
    fixes = [f"{r.role}.replicas up to {r.nodes * (per_node // r.gpus_per_pod)} (that many {r.gpus_per_pod}-GPU "
             f"pods fit on its {r.nodes} node{'s' if r.nodes != 1 else ''})"
             for r in usage.roles if r.gpus < r.nodes * per_node and r.gpus_per_pod <= per_node]
    if spec.tensor_parallel_size < per_node:
        fixes.append(f"a larger tensor_parallel_size (up to {per_node})")
    smaller = sorted(t.api_name for t in type(spec.instance_type)
                     if t.facts.gpus < per_node and t.facts.gpu_model == spec.instance_type.facts.gpu_model)
    if smaller:
        fixes.append(f"an instance type with fewer GPUs ({', '.join(smaller)})")
    yield SpecWarning(code="NodeGpusIdle", field="instance_type",
                  message=f"{usage.summary()} ({usage.breakdown()}); {usage.gpus_provisioned - usage.gpus_used} "
                          f"GPUs are paid for and idle. Fix: {'; or '.join(fixes)}")


@register_rule
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
        elif role_name == "decode" and scaling.min_replicas < 1:
            yield problem(f"{field}.min_replicas", scaling.min_replicas, "must be at least 1: every request, short "
                          "or long, ends on the decoder, so a decoder scaled to zero serves nothing",
                          "set min_replicas: 1 (prefill may scale lower)")
        for name, value in (("polling_interval_seconds", scaling.polling_interval_seconds),
                            ("cooldown_seconds", scaling.cooldown_seconds)):
            if value < 0:
                yield problem(f"{field}.{name}", value, "must not be negative", "use 0 or more seconds")
        if not scaling.triggers:
            yield problem(f"{field}.triggers", [], "autoscaling needs at least one trigger",
                          "add a cloudwatch or prometheus trigger, or remove autoscaling")
        yield from _triggers(field, scaling.triggers)
        if role_name == "decode" and scaling.max_replicas > 1:
            yield SpecWarning(code="SingleDecoder", field=f"{field}.max_replicas",
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

