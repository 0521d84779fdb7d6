"""The vLLM engine: its port, image, memory fraction, extra args and environment, read as vLLM 0.19.0 reads them.

See ``docs/checks.md`` and, for the settings that silently turn DPD or its signals off, ``docs/alerts.md``.
"""

from __future__ import annotations

import difflib
import json
import operator
import re
from collections.abc import Callable, Iterator, Sequence

from hyperpod_dpd.contracts.linux import EXEC_STRINGS_MAX, MAX_ARG_STRLEN, POINTER_BYTES, exec_string_bytes
from hyperpod_dpd.contracts.vllm import (
    VLLM_VERSION,
    Arity,
    ConfigKeys,
    Flag,
    Match,
    flag_values,
    human_readable_int,
    parse_flags,
    quantization_dtypes,
    vllm_flags,
    vllm_routes,
    vllm_value_rules,
)
from hyperpod_dpd.errors import Problem, SpecWarning
from hyperpod_dpd.observability.metrics import METRICS_DIR, METRICS_DIR_ENV
from hyperpod_dpd.spec import KNOWN_IMAGES
from hyperpod_dpd.validation.context import Finding, RuleContext, problem
from hyperpod_dpd.validation.naming import HTTP_PATH

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# github.com/distribution/reference regexp.go: reference := name [ ":" tag ] [ "@" digest ]; a name is an optional
# domain (host[:port], or a bracketed IPv6) then '/'-separated lower-case path components; a tag is
# [\w][\w.-]{0,127}; a digest is algorithm ":" hex of at least 32.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN = r"(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*" \
          r"[a-zA-Z0-9]))*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?"
IMAGE_REFERENCE = re.compile(rf"^(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?"
                             r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$")
# Environment variables that spec fields own; setting them in ``env`` would fight the field.
OWNED_ENV = {
    "PD_BUFFER_SIZE": "kv_cache.pd_buffer_size",
    "PYTHONHASHSEED": "kv_cache.hash_seed",
    "LMCACHE_SAVE_DECODE_CACHE": "kv_cache.save_decode_cache",
    "LMCACHE_CHUNK_SIZE": "kv_cache.chunk_tokens",
    "LMCACHE_MAX_LOCAL_CPU_SIZE": "kv_cache.cpu_cache_size",
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
# Flags that move vLLM's listener off http://0.0.0.0:<port> or stop it answering HTTP there, where the operator's
# proxy, its probes (health_check_path) and the metrics scrape reach it (vLLM 0.19.0).
LISTENER_FLAGS = {
    "--uds": "makes vLLM listen on a Unix socket instead of host:port (vllm/entrypoints/openai/api_server.py:544)",
    "--ssl-keyfile": "switches vLLM to HTTPS (api_server.py:564, the key and certificate go to uvicorn at :607), "
                     "while the operator's proxy, probes and scrape speak plain HTTP to the port",
    "--ssl-certfile": "switches vLLM to HTTPS (api_server.py:564, the key and certificate go to uvicorn at :607), "
                      "while the operator's proxy, probes and scrape speak plain HTTP to the port",
    "--grpc": "serves vLLM's gRPC API instead of the HTTP one (vllm/entrypoints/cli/serve.py:48)",
    "--headless": "starts no API server at all (vllm/entrypoints/cli/serve.py:54), so nothing answers on the port",
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
    # Splits each sequence's KV across the TP ranks in DCP groups (vllm/config/parallel.py:271); no KV
    # connector in vLLM 0.19.0 (vllm/distributed/kv_transfer/) reads the DCP layout, so both roles need it alike.
    "--decode-context-parallel-size": "how each sequence's KV is split across the tensor-parallel ranks",
    "--cp-kv-cache-interleave-size": "how each sequence's KV is split across the tensor-parallel ranks",
    "--dcp-kv-cache-interleave-size": "how each sequence's KV is split across the tensor-parallel ranks",
}
# Ports something else in the model pod may bind. The router's log sends both hops to <pod-ip>:8081
# (the operator's proxy container); 8080 is the CRD's default model-metrics port.
PROXY_PORT = 8081
METRICS_DEFAULT_PORT = 8080
# Flags that silently turn DPD or its signals off, as vLLM 0.19.0 reads them (vllm/engine/arg_utils.py,
# vllm/config/cache.py, vllm/v1/metrics/loggers.py). These two build vLLM's own offloading KV connector,
# which takes the place of the one the operator wires (LMCache over NIXL).
CONNECTOR_FLAGS = {
    "--kv-offloading-size": "vLLM's own KV offloading connector",
    "--kv-offloading-backend": "vLLM's own KV offloading connector",
}
# These size the KV cache directly, so gpu_memory_utilization (what the planner sized) no longer decides it and an
# oversized cache fails at start; --cpu-offload-gb and the --offload-* flags move weights out of the GPU budget the
# planner assumed.
MEMORY_FLAGS = {
    "--num-gpu-blocks-override": "fixes the number of KV cache blocks",
    "--kv-cache-memory-bytes": "fixes the KV cache's size in bytes",
    "--cpu-offload-gb": "moves weights to CPU memory",
    "--offload-backend": "offloads weights",
    "--offload-group-size": "offloads weights",
    "--offload-num-in-group": "offloads weights",
    "--offload-params": "offloads weights",
    "--cpu-offload-params": "offloads weights",
}
LORA_FLAG = "--enable-lora"
# Removes every vllm:* series the alerts and KEDA read.
METRICS_OFF_FLAG = "--disable-log-stats"
# LMCache 0.4.3 (lmcache/integration/vllm/utils.py): with --speculative-config the draft model's layers join the
# KV shape, so one role speculating makes the two roles' chunks incompatible.
ONE_ROLE_SHAPE_FLAGS = {"--speculative-config": "adds the draft model's layers to LMCache's KV shape"}
# LMCache's logger levels, quietest last; its Retrieved/Stored lines are INFO, so LMCACHE_LOG_LEVEL above INFO
# hides what the log alarms read.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# LMCACHE_* variables override LMCache's configuration, including the PD wiring the operator sets; how the
# operator passes it is undocumented, so these are warnings.
LMCACHE_PD_ENV = re.compile(r"^LMCACHE_(ENABLE_PD|PD_.*|TRANSFER_CHANNEL|NIXL_.*|CONFIG_FILE|USE_EXPERIMENTAL)$")


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
    elif not IMAGE_REFERENCE.match(spec.image):
        yield problem("image", spec.image, "is not an image reference as the container runtime parses it "
                      "(distribution/reference's grammar: lower-case repository path components, an optional "
                      "registry host[:port], a tag of at most 128 of [A-Za-z0-9_.-], an optional @sha256:<64 hex>); "
                      "the kubelet fails the pull with InvalidImageName", "write e.g. " + KNOWN_IMAGES[0])
    elif spec.image not in KNOWN_IMAGES:
        yield SpecWarning(code="UnknownImage", field="image",
                      message=f"{spec.image} is not one of the documented DPD images; it must bundle vLLM, LMCache, "
                              "NIXL and the EFA libfabric provider, or KV transfers fail")
    yield from _served_paths(ctx)
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
        elif key == "CUDA_VISIBLE_DEVICES":
            pod_gpus = min(spec.role_gpus(role) for _, role in spec.roles())
            visible = visible_gpus(spec.env[key], pod_gpus)
            if visible < spec.tensor_parallel_size:
                yield problem(f"env.{key}", spec.env[key], f"leaves {visible} of the pod's {pod_gpus} GPUs visible "
                              f"to vLLM, fewer than tensor_parallel_size {spec.tensor_parallel_size}: vLLM exits "
                              "with 'World size ... is larger than the number of available GPUs' "
                              "(vllm/config/parallel.py, counted under CUDA_VISIBLE_DEVICES by "
                              "vllm/utils/torch_utils.py)", "remove it: the device plugin gives the container "
                              "exactly the GPUs the pod requests")


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
        if flag.name not in OWNED_FLAGS:
            yield from _values(field, flag, arity)
        if flag.name in OWNED_FLAGS:
            yield problem(field, written, "contradicts a spec field that sets this flag",
                          f"remove it and set {OWNED_FLAGS[flag.name]}")
        elif flag.name in LISTENER_FLAGS:
            yield problem(field, written, f"{LISTENER_FLAGS[flag.name]}: the router, the health checks and the "
                          "metrics scrape would reach nothing", "remove it; port sets where vLLM listens "
                          "(plain HTTP on 0.0.0.0); terminate TLS in front of the endpoint instead")
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


def visible_gpus(value: str, physical: int) -> int:
    """How many GPUs CUDA sees under ``CUDA_VISIBLE_DEVICES=value`` with ``physical`` present, as torch's
    NVML count reads it (which vLLM's ``cuda_device_count_stateless`` calls): entries up to the first that is
    not a device (a negative or non-numeric one) or is out of range; ``GPU-``/``MIG-`` UUIDs count."""
    count = 0
    for entry in (part.strip() for part in value.split(",")):
        if entry.startswith(("GPU-", "MIG-")):
            count += 1
            continue
        if not (entry.isascii() and entry.isdigit()) or int(entry) >= physical:
            break
        count += 1
    return count


def _served_paths(ctx: RuleContext) -> Iterator[Finding]:
    """The health-check and metrics paths must be routes vLLM 0.19.0 serves: its GET routes are derived
    from the ``@router.get`` decorators under vllm/entrypoints/ (``/health`` in
    serve/instrumentator/health.py, ``/ping`` in sagemaker/api_router.py, ...), and /metrics is a Mount
    of prometheus_client's app (serve/instrumentator/metrics.py) that answers every path under it."""
    spec = ctx.spec
    routes = vllm_routes()
    paths = [("health_check_path", spec.health_check_path, routes.get(spec.health_check_path),
              ", ".join(routes.listed("GET")), "'/health'")]
    if spec.metrics.model_metrics_path is not None:
        path = spec.metrics.model_metrics_path
        paths.append(("metrics.model_metrics_path", path, routes.metrics(path),
                      "/metrics and the paths under it", "'/metrics' (or leave it unset)"))
    for field, path, served, listed, fix in paths:
        if served or not HTTP_PATH.match(path):
            continue  # the path's own shape is checked by the routing and observability rules
        message = f"is not a path vLLM {VLLM_VERSION} serves (GET {listed}), so every probe or scrape gets 404"
        if spec.image in KNOWN_IMAGES:
            yield problem(field, path, message, f"use {fix}")
        else:
            yield SpecWarning(code="UnknownRoute", field=field, message=f"{path!r} {message} (checked because "
                              "the image is not a documented DPD image; ignore if yours serves it)")


def _values(field: str, flag: Flag, arity: Arity | None) -> Iterator[Finding]:
    """A value vLLM's argparse refuses: not one of a ``Literal`` field's choices, not an ``int``/``float``,
    not JSON (``type``/``choices`` from ``_compute_kwargs`` in vllm/engine/arg_utils.py, shipped in the
    flags data); and a key a JSON config flag's class does not have (``@config`` in vllm/config/utils.py
    builds pydantic dataclasses with ``extra="forbid"``)."""
    known = vllm_flags()
    rule = known.values.get(flag.name)
    written = " ".join(flag.tokens)
    if rule is not None and flag.key is None and flag.value is not None:
        values = list(flag.tokens[1:]) if arity is Arity.MANY and not flag.inline_value else [flag.value]
        for value in values:
            reason = rule.refusal(value)
            if reason is not None:
                yield problem(field, written, f"{flag.name} {value!r} {reason}",
                              f"give {flag.name} {rule.describe()}")
                break
    if flag.key is None and flag.value is not None:
        yield from _bounds(field, flag, written)
        yield from _registry(field, flag, written)
    config = known.config_keys.get(flag.name)
    if config is None:
        return
    if flag.key is not None:
        stale = list(_stale_dotted(config, [part.rstrip("+") for part in flag.key.split(".")]))
    elif flag.value is None or flag.value in ("", "None"):
        return
    else:
        try:
            parsed = json.loads(flag.value)
        except ValueError:
            if rule is None:  # --speculative-config: json.loads (vllm/engine/arg_utils.py, add_cli_args)
                yield problem(field, written, f"{flag.name} takes a JSON object; vLLM exits with 'invalid "
                              "loads value'", f"write e.g. {flag.name} '{{\"{config.keys[0]}\": ...}}'")
            return
        stale = list(_stale_json(config, parsed, ""))
        if not stale:
            yield from _schema(field, flag, written, parsed)
    for path, owner in stale:
        key = path.rsplit(".", 1)[-1]
        near = difflib.get_close_matches(key, owner.keys, n=1, cutoff=0.6)
        yield problem(field, written, f"{path!r} is not a field of vLLM {VLLM_VERSION}'s {owner.cls}, which "
                      "forbids extra keys: vLLM exits with a validation error ('Extra inputs are not "
                      "permitted')", f"did you mean {near[0]!r}?" if near else
                      f"use one of its fields: {', '.join(owner.keys)}")


# vllm/config/*.py: pydantic's Field(ge=..., gt=..., le=..., lt=...) on the config field behind each flag.
_BOUND_WORDS: dict[str, tuple[str, Callable[[float, float], bool]]] = {
    "ge": ("at least", operator.ge), "gt": ("above", operator.gt), "le": ("at most", operator.le),
    "lt": ("below", operator.lt)}
# Flags whose value is a name vLLM looks up in a registry at start (vllm/reasoning/, vllm/tool_parsers/,
# vllm/v1/attention/backends/registry.py), and whether it compares the name upper-cased.
_REGISTRY_FLAGS = {"--reasoning-parser": ("reasoning_parsers", False),
                   "--attention-backend": ("attention_backends", True),
                   "--quantization": ("quantization_methods", False), "--config-format": ("config_formats", False)}


def _bounds(field: str, flag: Flag, written: str) -> Iterator[Finding]:
    """A number outside the bounds vLLM's config class puts on the flag's field (``--max-num-batched-tokens 0``,
    ``--stream-interval 0``): pydantic refuses it when vLLM builds its config at start."""
    bounds = vllm_value_rules().bounds.get(flag.name)
    if not bounds or flag.value is None:
        return
    try:
        number = float(human_readable_int(flag.value)) if flag.value[-1:].isalpha() else float(flag.value)
    except ValueError:
        return  # not a number: the type rule refuses it
    for key, limit in bounds.items():
        words, holds = _BOUND_WORDS[key]
        if not holds(number, limit):
            yield problem(field, written, f"{flag.name} must be {words} {limit:g}: vLLM {VLLM_VERSION} refuses to "
                          "start with a validation error ('Input should be ...', its config class in vllm/config/)",
                          f"give {flag.name} a value {words} {limit:g}, or remove it for vLLM's default")
            return


def _registry(field: str, flag: Flag, written: str) -> Iterator[Finding]:
    """For a flag the source-derived table has no value rule for: a value that is not JSON where argparse's type
    is ``json.loads``, one outside a ``Literal`` field or the choices vLLM adds at run time, and a parser or
    backend name vLLM has not registered (it stops at start, or for the reasoning parser once the weights are
    loaded, ``ParserManager.get_reasoning_parser``). All derived by scripts/vllm_value_rules.py."""
    rules = vllm_value_rules()
    if flag.value is None or vllm_flags().values.get(flag.name) is not None:
        return
    if flag.name in rules.json_flags and flag.name not in vllm_flags().config_keys:
        try:
            json.loads(flag.value)
        except ValueError:
            yield problem(field, written, f"{flag.name} takes JSON; vLLM exits with 'invalid loads value'",
                          f"write {flag.name} as JSON, e.g. '[\"*\"]' or '{{}}'")
        return
    if flag.name in rules.closed:
        names = rules.closed[flag.name]
        if flag.value not in names and flag.value.replace("-", "_").lower() not in names:
            yield problem(field, written, f"{flag.value!r} is not one of the values vLLM {VLLM_VERSION} takes for "
                          f"{flag.name}; it refuses it", f"use one of {', '.join(names)}")
        return
    if flag.name not in _REGISTRY_FLAGS:
        return
    registry, upper = _REGISTRY_FLAGS[flag.name]
    names = rules.registries[registry]
    value = flag.value.upper() if upper else flag.value
    if value not in names:
        near = difflib.get_close_matches(value, names, n=1, cutoff=0.6)
        yield problem(field, written, f"{flag.value!r} is not a name vLLM {VLLM_VERSION} has registered for "
                      f"{flag.name}; it refuses it", f"did you mean {near[0]!r}?" if near else
                      f"use one of {', '.join(names)}")


def _schema(field: str, flag: Flag, written: str, value: object) -> Iterator[Finding]:
    """A JSON config value of the wrong type, out of its bounds or its enum, one level down and deeper
    (``-cc '{"cudagraph_mode": "FULL_AND_PIECEWIS"}'``, ``num_speculative_tokens: 0``): the JSON schema pydantic
    validates the flag's config class with, derived by scripts/vllm_value_rules.py. Unknown keys are the key
    rule's."""
    schema = vllm_value_rules().config_schemas.get(flag.name)
    if not schema or "unavailable" in schema:
        return
    import jsonschema  # noqa: PLC0415 - only a JSON config flag needs it

    for error in jsonschema.Draft202012Validator(schema).iter_errors(value):
        if error.validator == "additionalProperties":
            continue
        path = ".".join(str(part) for part in error.absolute_path) or "the value"
        yield problem(field, written, f"{path}: {error.message[:200]}; vLLM {VLLM_VERSION} refuses it with a "
                      f"validation error for its {flag.name} class", f"fix {path} as the message says")
        return


def _stale_json(config: ConfigKeys, value: object, prefix: str) -> Iterator[tuple[str, ConfigKeys]]:
    """Keys of a JSON object that its config class (or a nested one, ``pass_config``) does not have, by dotted
    path. A free-dict field (``kv_connector_extra_config``) is not looked into."""
    if not isinstance(value, dict):
        return
    for key, inner in value.items():
        path = f"{prefix}{key}"
        if key not in config.keys:
            yield path, config
        elif key in config.nested:
            yield from _stale_json(config.nested[key], inner, f"{path}.")


def _stale_dotted(config: ConfigKeys, parts: list[str]) -> Iterator[tuple[str, ConfigKeys]]:
    """The first part of ``--flag.a.b`` that its config class does not have (vLLM nests the dotted keys)."""
    for depth, part in enumerate(parts):
        if part not in config.keys:
            yield ".".join(parts[:depth + 1]), config
            return
        if part not in config.nested:
            return  # a scalar or a free dict: whatever follows is the value's business
        config = config.nested[part]


def _unknown_flag(field: str, flag: Flag) -> Problem:
    known = list(vllm_flags().flags) + list(vllm_flags().aliases)
    near = difflib.get_close_matches(flag.name, known, n=1, cutoff=0.6)
    fix = (f"did you mean {near[0]}?" if near else
           f"remove it; 'vllm serve --help=all' lists the flags of vLLM {VLLM_VERSION}")
    return problem(field, flag.written, f"is not a flag of vLLM {VLLM_VERSION}, the version the DPD images ship; "
                   "vLLM would exit with 'unrecognized arguments'", fix)


def all_args(ctx: RuleContext) -> Iterator[tuple[str, dict[str, str | None]]]:
    """The shared args and each role's, as flag values, each with the field it is reported under."""
    yield "args", flag_values(ctx.spec.args)
    for role_name, role in ctx.spec.roles():
        yield f"{role_name}.args", flag_values(role.args)


def engine_flags(ctx: RuleContext) -> Iterator[Finding]:
    """Flags that replace the PD connector, bypass the memory sizing or remove the metrics."""
    for field, flags in all_args(ctx):
        for flag, what in CONNECTOR_FLAGS.items():
            if flag in flags:
                yield Problem(field=field, value=flag, message=f"configures {what}, which replaces the LMCache/NIXL "
                              "connector the operator wires for prefill/decode: no KV cache would reach the decoder",
                              fix="remove it; kv_cache sets the PD transfer")
        for flag, what in MEMORY_FLAGS.items():
            if flag in flags:
                yield Problem(field=field, value=f"{flag} {flags[flag] or ''}".strip(),
                              message=f"{what}, so gpu_memory_utilization (what the planner sized, with the PD "
                                      "buffer beside it) no longer decides GPU memory: the pod can run out of "
                                      "memory at start or leave no room for the PD buffer",
                              fix="remove it and size with gpu_memory_utilization (run `hyperpod-dpd plan`)")
        if METRICS_OFF_FLAG in flags and ctx.spec.metrics.enabled:
            yield Problem(field=field, value=METRICS_OFF_FLAG,
                          message="stops vLLM's statistics, and with them every vllm:* series the DPD alerts, the "
                                  "dashboard, `verify --smoke` and Prometheus autoscaling triggers read",
                          fix="remove it, or set metrics.enabled: false to say the endpoint is unobserved")
    shared = flag_values(ctx.spec.args)
    prefill, decode = flag_values(ctx.spec.prefill.args), flag_values(ctx.spec.decode.args)
    for flag, what in ONE_ROLE_SHAPE_FLAGS.items():
        if flag in shared:
            continue
        if (flag in prefill) != (flag in decode) or prefill.get(flag) != decode.get(flag):
            role = "prefill" if flag in prefill else "decode"
            yield Problem(field=f"{role}.args", value=flag,
                          message=f"{what} on one role only; prefill and decode must agree on the KV layout, or "
                                  "the decoder never finds the KV the prefiller sent",
                          fix="move it to the shared args, or give both roles the same value")
    yield from _cross_flag(ctx)
    yield from _api_key(ctx)
    for field, flags in all_args(ctx):
        if flags.get(LORA_FLAG, "no") != "no":
            # LMCache 0.4.3 keys a chunk by its token hashes only (lmcache/v1/token_database.py), never by the
            # LoRA adapter: one adapter's KV would be sent to a request for another.
            yield Problem(field=field, value=LORA_FLAG, message="serves LoRA adapters over LMCache, whose cache keys "
                          "ignore the adapter: the decoder would get KV computed with another adapter's weights",
                          fix="remove --enable-lora from a DPD endpoint (serve adapters on an aggregated one)")


# vLLM 0.19.0 turns on its AuthenticationMiddleware when --api-key or VLLM_API_KEY is set
# (vllm/entrypoints/openai/api_server.py:265-266); it answers 401 to every request without the Bearer token
# whose path starts with /v1, and lets every other path (/health, /ping, /metrics) through
# (vllm/entrypoints/openai/server_utils.py:38-47).
API_KEY_FLAG = "--api-key"
API_KEY_ENV = "VLLM_API_KEY"
AUTHENTICATED_PREFIX = "/v1"


def _api_key(ctx: RuleContext) -> Iterator[Finding]:
    """An API key on the workers: the probes of a /v1 path surely fail, the DPD request path likely does."""
    spec = ctx.spec
    where = [field for field, flags in all_args(ctx) if API_KEY_FLAG in flags]
    if spec.env.get(API_KEY_ENV):
        where.append(f"env.{API_KEY_ENV}")
    if not where:
        return
    what = f"{API_KEY_FLAG} or {API_KEY_ENV}"
    path = "/" + spec.health_check_path.lstrip("/")
    if path == AUTHENTICATED_PREFIX or path.startswith(AUTHENTICATED_PREFIX + "/"):
        yield problem("health_check_path", spec.health_check_path,
                      f"is under {AUTHENTICATED_PREFIX}, which vLLM {VLLM_VERSION} answers with 401 once {what} "
                      f"is set ({', '.join(where)}): the ALB's probe carries no token, so every target is unhealthy",
                      "use '/health', which vLLM serves without a token")
    yield SpecWarning(code="ApiKeyOnWorkers", field=where[0],
                      message=f"{what} makes vLLM answer 401 to every {AUTHENTICATED_PREFIX} request without the "
                              "key: the operator's router sends the prefill request itself and is not documented "
                              "to carry a key, and `verify --smoke` and `bench` send none, so DPD requests and the "
                              "checks fail; the key also sits in plain text in the manifest and the CloudFormation "
                              "template. Remove it and restrict who reaches the endpoint at the load balancer "
                              "instead (an internal scheme, security groups)")


def effective_flags(shared: Sequence[str], role: Sequence[str]) -> tuple[dict[str, str | None], dict[str, str]]:
    """One role's flag values as vLLM sees them (the shared args, then the role's, a later flag winning), and
    for each flag the field that set it last. A ``--no-x`` switch is recorded as ``--x`` with value ``"no"``."""
    values: dict[str, str | None] = {}
    where: dict[str, str] = {}
    for field, args in (("args", shared), ("role", role)):
        flags, _ = parse_flags(args)
        for flag in flags:
            if flag.key is not None or flag.match not in (Match.EXACT, Match.ABBREVIATION):
                continue
            name, value = flag.name, flag.value
            if name.startswith("--no-") and "--" + name[5:] in vllm_flags().flags:
                name, value = "--" + name[5:], "no"
            values[name], where[name] = value, field
    return values, where


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return human_readable_int(value)
    except ValueError:
        return None  # refused by the value rule already


def _cross_flag(ctx: RuleContext) -> Iterator[Finding]:
    """vLLM's own checks across flags that fail at start, where the spec states every input (explicit flags,
    max_model_len, <role>.max_num_seqs); defaults vLLM picks at run time are not guessed."""
    seen: set[tuple[str, str]] = set()
    for role_name, role in ctx.spec.roles():
        values, where = effective_flags(ctx.spec.args, role.args)

        def field(*names: str, role_name: str = role_name, where: dict[str, str] = where) -> str:
            return f"{role_name}.args" if any(where.get(n) == "role" for n in names) else "args"

        model_len = ctx.spec.max_model_len
        chunked_off = values.get("--enable-chunked-prefill", "") == "no"
        batched = _int(values.get("--max-num-batched-tokens"))
        found: list[tuple[str, str, str, str]] = []
        # vllm/config/scheduler.py:260-271 (SchedulerConfig.verify_max_model_len)
        if chunked_off and batched is not None and batched < model_len:
            found.append((field("--enable-chunked-prefill", "--max-num-batched-tokens"),
                          f"--no-enable-chunked-prefill with --max-num-batched-tokens {batched}",
                          f"is below max_model_len {model_len} with chunked prefill off: vLLM refuses to start "
                          "('max_num_batched_tokens ... is smaller than max_model_len', vllm/config/scheduler.py)",
                          f"raise --max-num-batched-tokens to at least {model_len}, or keep chunked prefill on"))
        # vllm/config/scheduler.py:273-278
        if batched is not None and role.max_num_seqs is not None and batched < role.max_num_seqs:
            found.append((field("--max-num-batched-tokens"), f"--max-num-batched-tokens {batched}",
                          f"is below {role_name}.max_num_seqs {role.max_num_seqs}: vLLM refuses to start "
                          "('max_num_batched_tokens ... must be greater than or equal to max_num_seqs', "
                          "vllm/config/scheduler.py)", f"raise it to at least {role.max_num_seqs}"))
        # vllm/engine/arg_utils.py:1996-2004 (_check_feature_supported): any value but the default 1 of either
        # flag raises NotImplementedError('Concurrent Partial Prefill is not supported') before the engine starts.
        for name in ("--max-num-partial-prefills", "--max-long-partial-prefills"):
            count = _int(values.get(name))
            if count is not None and count >= 1 and count != 1:
                found.append((field(name), f"{name} {count}", f"asks for concurrent partial prefill, which vLLM "
                              f"{VLLM_VERSION} does not support: it exits with 'Concurrent Partial Prefill is not "
                              "supported' (vllm/engine/arg_utils.py, _check_feature_supported)", f"remove {name}"))
        # vllm/config/lora.py:101-106 (LoRAConfig, built with --enable-lora)
        loras, cpu_loras = _int(values.get("--max-loras")), _int(values.get("--max-cpu-loras"))
        if values.get("--enable-lora", "no") != "no" and cpu_loras is not None and cpu_loras < (loras or 1):
            found.append((field("--max-cpu-loras"), f"--max-cpu-loras {cpu_loras}", f"is below --max-loras "
                          f"{loras or 1}: vLLM refuses to start ('max_cpu_loras ... must be >= max_loras', "
                          "vllm/config/lora.py)", f"raise --max-cpu-loras to at least {loras or 1}, or remove it"))
        # vllm/config/parallel.py:369-370
        if values.get("--enable-eplb", "no") != "no" and values.get("--enable-expert-parallel", "no") == "no":
            found.append((field("--enable-eplb"), "--enable-eplb", "needs --enable-expert-parallel: vLLM refuses "
                          "to start ('enable_expert_parallel must be True to use EPLB', vllm/config/parallel.py)",
                          "add --enable-expert-parallel (a MoE model), or remove --enable-eplb"))
        found += _speculation(values, field("--speculative-config", "--async-scheduling"))
        # vllm/config/parallel.py:391-400: DCP reuses the TP group's GPUs, so TP must divide into DCP groups
        dcp = _int(values.get("--decode-context-parallel-size"))
        if dcp == 0:
            found.append((field("--decode-context-parallel-size"), f"--decode-context-parallel-size {dcp}",
                          "is 0, and vLLM divides the tensor-parallel size by it: it stops at start with "
                          "'integer modulo by zero' (vllm/config/parallel.py)",
                          "remove it, or use a divisor of tensor_parallel_size"))
        if dcp is not None and dcp > 0 and ctx.spec.tensor_parallel_size % dcp:
            found.append((field("--decode-context-parallel-size"), f"--decode-context-parallel-size {dcp}",
                          f"does not divide tensor_parallel_size {ctx.spec.tensor_parallel_size}: vLLM refuses to "
                          "start ('tp_size ... must be divisible by dcp_size', vllm/config/parallel.py)",
                          "use a divisor of tensor_parallel_size, or 1"))
        if values.get("--dcp-comm-backend") == "a2a" and (dcp is None or dcp <= 1):
            found.append((field("--dcp-comm-backend"), "--dcp-comm-backend a2a", "requires "
                          "--decode-context-parallel-size above 1: vLLM refuses to start (vllm/config/parallel.py)",
                          "remove it, or set --decode-context-parallel-size"))
        # vllm/config/vllm.py:522-528: the model dtype must be one the quantization method supports. Only
        # float32 is judged: a method vLLM may swap for another (gptq -> gptq_marlin, ...) keeps fp16/bf16 but
        # none of those swaps adds float32.
        method, dtype = values.get("--quantization"), values.get("--dtype")
        supported = quantization_dtypes().get(method or "")
        if dtype in ("float", "float32") and supported is not None and "float32" not in supported:
            found.append((field("--quantization", "--dtype"), f"--quantization {method} --dtype {dtype}",
                          f"is refused by vLLM at start: {method} supports the model dtypes {', '.join(supported)} "
                          "only ('... is not supported for quantization method', vllm/config/vllm.py)",
                          f"use --dtype {supported[0]} (or auto)"))
        # vllm/entrypoints/openai/cli_args.py:363-366 (validate_parsed_serve_args)
        for needs, needed in (("--enable-auto-tool-choice", "--tool-call-parser"),
                              ("--enable-log-outputs", "--enable-log-requests")):
            missing = needed not in values or values[needed] == "no" or (
                vllm_flags().flags.get(needed) is not Arity.NONE and not values[needed])
            if needs in values and values[needs] != "no" and missing:
                found.append((field(needs), needs, f"requires {needed}: vLLM exits with 'Error: {needs} requires "
                              f"{needed}' (vllm/entrypoints/openai/cli_args.py)", f"add {needed}" +
                              (" <parser>, e.g. llama3_json or hermes" if needed == "--tool-call-parser" else "")))
        parser = values.get("--tool-call-parser")
        tool_parsers = vllm_value_rules().registries["tool_parsers"]
        if values.get("--enable-auto-tool-choice", "no") != "no" and parser and parser not in tool_parsers:
            near = difflib.get_close_matches(parser, tool_parsers, n=1, cutoff=0.6)
            # vllm/entrypoints/openai/api_server.py (validate_api_server_args): only with auto tool choice on
            found.append((field("--tool-call-parser"), f"--tool-call-parser {parser}", f"is not a tool call parser "
                          f"vLLM {VLLM_VERSION} has registered; with --enable-auto-tool-choice it exits with "
                          "'invalid tool call parser'", f"did you mean {near[0]!r}?" if near else
                          f"use one of {', '.join(tool_parsers)}"))
        for field_name, value, message, fix in found:
            if (field_name, message) not in seen:
                seen.add((field_name, message))
                yield Problem(field=field_name, value=value, message=message, fix=fix)


# vllm/config/speculative.py: SpeculativeEagleTypes, NgramGPUTypes and draft_model are the methods async
# scheduling supports (vllm/config/vllm.py:731-745).
ASYNC_SPECULATION = ("eagle", "eagle3", "extract_hidden_states", "ngram_gpu", "draft_model")


def _speculation(values: dict[str, str | None], field: str) -> list[tuple[str, str, str, str]]:
    """--speculative-config's cross-key check and its check against --async-scheduling, where the spec
    states them (the value's own types and bounds are the schema rule's)."""
    try:
        config = json.loads(values.get("--speculative-config") or "null")
    except ValueError:
        return []
    if not isinstance(config, dict):
        return []
    found = []
    low, high = config.get("prompt_lookup_min"), config.get("prompt_lookup_max")
    if isinstance(low, int) and isinstance(high, int) and low > high:
        # vllm/config/speculative.py:405-425
        found.append((field, f"--speculative-config prompt_lookup_min {low}", f"is above prompt_lookup_max {high}: "
                      "vLLM refuses to start ('prompt_lookup_min ... must be <= prompt_lookup_max')",
                      f"use a prompt_lookup_min of at most {high}"))
    method = config.get("method")
    if values.get("--async-scheduling", "no") != "no" and isinstance(method, str) and (
            method not in ASYNC_SPECULATION and not method.endswith("_mtp")):
        found.append((field, "--async-scheduling", f"does not work with the speculative method {method!r}: vLLM "
                      "refuses to start ('Currently, async scheduling is only supported with EAGLE/MTP/Draft "
                      "Model/NGram GPU', vllm/config/vllm.py)", "remove --async-scheduling (vLLM turns async "
                      "scheduling on by itself where it can)"))
    return found


def environment(ctx: RuleContext) -> Iterator[Finding]:
    """Environment variables that hide the log lines the alarms read or rewire LMCache's PD transfer."""
    for key, value in ctx.spec.env.items():
        if key == METRICS_DIR_ENV and ctx.spec.metrics.enabled:
            yield Problem(field=f"env.{key}", value=value,
                          message=f"is set by the library to {METRICS_DIR} (a directory that exists before vLLM "
                                  "starts) so that LMCache's metrics reach vLLM's /metrics; a directory that does "
                                  "not exist stops vLLM at start",
                          fix="remove it from env")
        elif key == "LMCACHE_LOG_LEVEL" and value.upper() in LOG_LEVELS[2:]:
            yield SpecWarning(code="LogLinesHidden", field=f"env.{key}",
                          message=f"{value} hides LMCache's INFO lines ('Retrieved ... out of', 'Stored ... "
                                  "throughput') that the KvNotRetrieved and KvTransferBelow1GBps alarms read; "
                                  "use INFO")
        elif LMCACHE_PD_ENV.match(key):
            yield SpecWarning(code="LmcachePdOverride", field=f"env.{key}",
                          message="overrides LMCache's prefill/decode wiring, which the operator sets for each "
                                  "role; a wrong role, channel or peer stops every KV transfer. Remove it unless "
                                  "AWS support asked for it")


def exec_limits(ctx: RuleContext) -> Iterator[Finding]:
    """What execve() refuses with E2BIG, so the container would never start: one environment string or argument
    over MAX_ARG_STRLEN, or a role's strings over the stack's share (limits and sources in ``contracts.linux``).

    Counted are the strings the spec gives: ``NAME=value`` for each of ``env``, and the shared then the role's
    ``args``; the operator's own variables and flags come on top, so the total keeps room for them.
    """
    spec = ctx.spec
    given = [(f"env.{key}", f"{key}={value}") for key, value in spec.env.items()]
    given += [(f"args[{i}]", arg) for i, arg in enumerate(spec.args)]
    per_role = {name: [(f"{name}.args[{i}]", arg) for i, arg in enumerate(role.args)] for name, role in spec.roles()}
    for field_name, text in [*given, *(item for own in per_role.values() for item in own)]:
        size = exec_string_bytes(text)
        if size > MAX_ARG_STRLEN:
            yield problem(field_name, f"{size} bytes", f"is longer than the {MAX_ARG_STRLEN} bytes Linux passes in "
                          "one environment string or argument (MAX_ARG_STRLEN, include/uapi/linux/binfmts.h, its "
                          "NUL counted): execve() fails with 'argument list too long' and the container never "
                          "starts", "shorten it, or put the content in a file on the model volume and pass its path")
    for role_name, own in per_role.items():
        strings = [text for _, text in (*given, *own)]
        total = sum(exec_string_bytes(text) + POINTER_BYTES for text in strings)
        if total > EXEC_STRINGS_MAX:
            yield problem(role_name, f"{total} bytes", f"gets {len(strings)} environment strings and arguments of "
                          f"{total} bytes with their pointers, over the {EXEC_STRINGS_MAX} bytes execve() allows "
                          "under the default 8 MiB stack limit (a quarter of it, fs/exec.c bprm_stack_limits): the "
                          "container never starts", "move the largest values of env and args into files on the "
                          "model volume")
