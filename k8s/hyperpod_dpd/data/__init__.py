"""Package data: vLLM's flag set (see :mod:`hyperpod_dpd.vllm_args`)."""
