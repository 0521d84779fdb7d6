"""The planner's model of the hardware and of vLLM, in one place, each number with its reason.

These are estimates for planning, not measurements: vLLM profiles the real figures when it starts.
"""

from __future__ import annotations

# Peak dense (no 2:4 sparsity) BF16 tensor-core throughput per GPU, in TFLOP/s, from NVIDIA's
# datasheets for the SXM/HGX parts: H100 SXM 989; H200 989 (same GH100 die); HGX B200 2,250;
# HGX B300 2,250 (Blackwell Ultra raises FP4, not BF16). Kept here rather than in
# ``spec/instances.py`` because only the planner's prefill estimate uses it.
PEAK_DENSE_BF16_TFLOPS: dict[str, float] = {"H100": 989.0, "H200": 989.0, "B200": 2250.0, "B300": 2250.0}

# HBM bandwidth per GPU, in TB/s, from the same NVIDIA datasheets: H100 SXM 3.35 (HBM3), H200 4.8
# (HBM3e), HGX B200 8 and HGX B300 8 (HBM3e). A decode step cannot read the weights and the KV cache
# faster than this; the advisor's roofline for models outside AIConfigurator's data rests on it.
HBM_TBPS: dict[str, float] = {"H100": 3.35, "H200": 4.8, "B200": 8.0, "B300": 8.0}

# Model FLOPs utilisation of a long prefill: tensor-parallel GEMMs of a 70B-class model on Hopper
# reach roughly 40-50 % of peak in vLLM; 0.4 keeps the compute estimate on the slow side, so the
# transfer-versus-compute comparison does not flatter DPD.
PREFILL_MFU = 0.4

# GPU memory inside vLLM's ``--gpu-memory-utilization`` share that is neither weights nor KV cache,
# per GPU: the activation peak of the profiling run at vLLM's default 8,192 batched tokens (about
# 1-2 GiB at TP 8), CUDA graph pools, NCCL and cuBLAS workspaces (about 1.5-2 GiB). vLLM measures
# this at start; 4 GiB is a deliberately round upper estimate.
ACTIVATION_RESERVE_BYTES = 4 * 2**30

# GPU memory is taken as EC2 reports it (``InstanceFacts.gpu_memory``); CUDA reports about 1 % less
# (79.2 GiB on an 80 GiB H100), which the headroom below absorbs.

# Memory outside vLLM's share that the CUDA context, NCCL and NIXL/EFA registrations need on every
# GPU; a node with less headroom than this beside the share and the PD buffer is flagged.
CUDA_CONTEXT_HEADROOM_BYTES = 1 * 2**30

# Below this many parameters a model gains little from DPD (the operator documents 70B+; the
# advice starts at 30B so that 32B-class models are not flagged).
SMALL_MODEL_PARAMETERS = 30_000_000_000

# A routing threshold below this sends prompts whose prefill takes a few tens of milliseconds through
# the router, a transfer and a second scheduler; the operator's default is 4,096 and its docs say
# DPD helps from about 4,000 input tokens.
SHORT_PROMPT_TOKENS = 2048

# A transfer at line rate that costs more than this fraction of the prefill compute it follows is
# flagged: the physical floor alone eats the gain, before protocol overhead.
TRANSFER_TO_PREFILL_WARN_RATIO = 0.25
