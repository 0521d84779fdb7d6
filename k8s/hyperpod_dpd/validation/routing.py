"""How requests reach the roles: the router's threshold and strategy, the routes, and the KV cache between them.

See ``docs/checks.md`` for what is checked and why.
"""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_dpd.contracts.vllm import VLLM_VERSION
from hyperpod_dpd.errors import SpecWarning
from hyperpod_dpd.spec import KNOWN_IMAGES, RoutingStrategy
from hyperpod_dpd.validation.context import Finding, RuleContext, problem
from hyperpod_dpd.validation.naming import HTTP_PATH

# The text-generation routes vLLM 0.19.0 serves (vllm/entrypoints/openai/*/api_router.py,
# vllm/entrypoints/sagemaker/api_router.py, vllm/entrypoints/anthropic/api_router.py).
VLLM_GENERATION_ROUTES = ("v1/chat/completions", "v1/completions", "v1/responses", "v1/messages", "invocations")
MAX_HASH_SEED = 4294967295  # Python's PYTHONHASHSEED range
# The invocation path AWS prescribes for kvaware routing (the router, not vLLM, answers it).
KV_AWARE_ROUTE = "completions"


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
