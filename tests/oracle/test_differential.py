"""Our synth-time verdict (``validate``) against vLLM 0.19.0's own, on command lines generated from its table.

No spec vLLM refuses may be accepted by ``validate``, and none it accepts refused, apart from the classes in
``EXCEPTIONS``, each with why. The figures are in docs/checks.md; a test fails when agreement drops.
"""

from __future__ import annotations

from typing import Any

Outcome = Any  # conftest.Outcome: fixtures hand it over; conftest is not importable by name

# Case-name prefixes where the verdicts may differ, and why. Keep it short: a new disagreement is a rule to fix.
EXCEPTIONS = {
    # vLLM refuses, validate accepts
    "--additional-config bogus-value": "a free dict pydantic checks; any JSON object passes, a plain word is "
                                       "left to the engine check",
    "--hf-overrides bogus-value": "same: a free dict, checked by `validate --engine`",
    "--compilation-config compilation_time=-1": "an init=False field pydantic's schema lists as settable",
    "--compilation-config max_cudagraph_capture_size=-1": "an assertion in VllmConfig's code, not a bound",
    "--max-cudagraph-capture-size": "the same assertion (VllmConfig), which depends on the CUDA-graph mode",
    "--data-parallel-": "data-parallel load-balancing switches; every data-parallel size but 1 is refused already",
    "--distributed-executor-backend bogus-value": "vLLM also takes an executor class's qualified name, which only "
                                                  "importing it can check",
    "--enable-dbo": "micro-batching needs a DeepEP all2all backend: a cross-check in VllmConfig's code",
    "--enable-elastic-ep": "elastic expert parallelism needs EPLB: a cross-check in ParallelConfig's code",
    "--enable-expert-parallel": "needs a MoE model: vLLM reads the experts from config.json (`validate --engine`)",
    "--ray-workers-use-nsight": "needs the Ray executor: a cross-check in ParallelConfig's code",
    "--reasoning-config {}": "vLLM needs the tokenizer files to resolve the reasoning tokens; the engine check's "
                             "model folder holds only config.json",
    "--show-hidden-metrics-for-version bogus-value": "a version string vLLM parses with packaging's grammar",
    "pair --attention-backend FLASHMLA": "whether a backend suits the model, GPU and KV dtype is vLLM's support "
                                         "matrix, checked in the worker; `validate --engine` runs it",
    "pair --kv-cache-dtype fp8 --attention-backend TREE_ATTN": "the same support matrix",
    # validate refuses, vLLM accepts
    "--max-loras ": "vLLM checks the bound only with --enable-lora; a value below 1 is wrong either way",
    "--mm-": "multimodal bounds vLLM checks only for a multimodal model; the value is wrong either way",
    "--video-pruning-rate": "the same: a multimodal-only bound",
    "max_model_len=-1": "vLLM reads -1 as 'the model's maximum'; the spec's max_model_len sizes the KV cache and "
                        "the PD buffer, so it must be a number",
    "pair --max-num-seq 8": "an abbreviation of --max-num-seqs, which <role>.max_num_seqs owns",
    "pair --enable-lora": "LoRA over LMCache is refused by design: LMCache's keys ignore the adapter",
}
# Measured on the generated table (docs/checks.md, "Our rules against vLLM's"): 519 cases, 491 agree; of the 315
# vLLM refuses validate refuses 296, of the 204 it accepts validate accepts 195. Raise them as rules improve.
MIN_CASES = 519
MIN_AGREE = 491
MIN_BOTH_REFUSE = 296
MIN_BOTH_ACCEPT = 195


def _excepted(outcome: Outcome) -> str | None:
    for prefix, why in EXCEPTIONS.items():
        if outcome.case.name.startswith(prefix):
            return why or "listed"
    return None


def test_the_oracle_gave_a_verdict_on_every_case(differential: list[Outcome]) -> None:
    could_not_run = [(o.case.name, o.theirs.error) for o in differential if o.theirs.ok is None]
    assert not could_not_run
    assert len(differential) >= MIN_CASES


def test_validate_accepts_nothing_vllm_refuses_beyond_the_listed_exceptions(differential: list[Outcome]) -> None:
    missed = [(o.case.name, o.theirs.stage, (o.theirs.error or "")[:160]) for o in differential
              if o.ours and o.theirs.ok is False and _excepted(o) is None]
    assert not missed


def test_validate_refuses_nothing_vllm_accepts_beyond_the_listed_exceptions(differential: list[Outcome]) -> None:
    extra = [(o.case.name, o.our_problems[:1]) for o in differential
             if not o.ours and o.theirs.ok is True and _excepted(o) is None]
    assert not extra


def test_agreement_stays_at_its_measured_level(differential: list[Outcome]) -> None:
    agree = sum(o.agree for o in differential)
    refused = [o for o in differential if o.theirs.ok is False]
    accepted = [o for o in differential if o.theirs.ok is True]
    print(f"\ndifferential: {len(differential)} cases, {agree} agree; vLLM refuses {len(refused)}, validate "
          f"refuses {sum(not o.ours for o in refused)} of them; vLLM accepts {len(accepted)}, validate accepts "
          f"{sum(o.ours for o in accepted)} of them")
    assert agree >= MIN_AGREE
    assert sum(not o.ours for o in refused) >= MIN_BOTH_REFUSE
    assert sum(o.ours for o in accepted) >= MIN_BOTH_ACCEPT


def test_every_exception_still_happens(differential: list[Outcome]) -> None:
    """An exception no case needs any more is dropped, so the list stays the disagreements that exist."""
    used = {prefix for prefix in EXCEPTIONS for o in differential
            if not o.agree and o.case.name.startswith(prefix)}
    assert set(EXCEPTIONS) - used == set()
