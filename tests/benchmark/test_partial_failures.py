"""A part of a level that failed, went missing or was counted short is a finding (audit B10-B12), each reproduced
from the recorded stub run in tests/benchmark/data/doc-run (no client is run) or from the audit's own figures,
bench's number beside the truth; the recorded healthy run stays quiet.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import write_spec

from hyperpod_dpd.benchmark.proof.counts import prompt_length_warnings, short_count_warnings
from hyperpod_dpd.benchmark.proof.disaggregation import LevelDisaggregation
from hyperpod_dpd.benchmark.proof.proof import RunProof, folder_proof
from hyperpod_dpd.benchmark.run.results import BenchmarkResults, collect, read_files
from hyperpod_dpd.cli import main
from hyperpod_dpd.clients.seams import Seams
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.load_point import Load

DOC_RUN = Path(__file__).resolve().parent / "data" / "doc-run"
ISL, THRESHOLD = 64, 32


def _recorded() -> tuple[dict[str, str], BenchmarkResults, RunProof]:
    files = read_files(DOC_RUN / "dpd")
    proof, why = folder_proof(files, endpoint="dpd-test")
    assert proof is not None, why
    return files, collect(files), proof


def _codes(proof: RunProof, results: BenchmarkResults) -> dict[str, list[int | None]]:
    found: dict[str, list[int | None]] = {}
    for w in proof.warnings(results, isl=ISL, threshold=THRESHOLD):
        found.setdefault(w.code.value, []).append(w.load.concurrency)
    return found


def test_the_recorded_healthy_run_stays_quiet() -> None:
    _, results, proof = _recorded()
    assert _codes(proof, results) == {}


def _edited(proof: RunProof, edit: Any) -> RunProof:
    """The proof with each window's pods' counters passed through ``edit(window, pod, sample)``."""
    text = json.loads(proof.to_text())
    for window, pods in text["windows"].items():
        for pod, sample in pods.items():
            edit(int(window), pod, sample)
    return RunProof.parse(json.dumps(text))


# --- B10: the server's prompt length against --isl --------------------------------------------------------------


def test_prompts_longer_on_the_server_than_isl_are_flagged() -> None:
    """The audit's case: --isl 4352, the server's tokenizer counted 4,925 per request (+12% over Llama 3's 4,386);
    bench said D(4352,64), trusted. The engines' prompt counter over the requests they finished is the witness."""
    results = collect(read_files(DOC_RUN / "dpd"))
    level = dataclasses.replace(results.levels[0], scenario="D(4352,64)", mean_input_tokens=None)
    seen = LevelDisaggregation(load=level.load, disaggregated=44, local=0, fallback=0, external_kv_tokens=0,
                               prompt_tokens=4_925 * 44, finished_requests=44)
    (found,) = prompt_length_warnings([level], {level.load: seen}, isl=4352)
    print(f"bench: {found.render()}; truth: 4,925 tokens per request against --isl 4352")
    assert found.code.value == "prompt-length"
    assert "4,925 prompt tokens per request" in found.message and "+13%" in found.message
    assert "not the D(4352,64) it is labelled" in found.message
    healthy = dataclasses.replace(seen, prompt_tokens=4_386 * 44)  # 4,352 plus Llama 3's 34 template tokens
    assert prompt_length_warnings([level], {level.load: healthy}, isl=4352) == []


def test_a_recorded_run_whose_engines_counted_longer_prompts_is_flagged() -> None:
    """The recorded run's decoder counted 64 prompt tokens per request; scaled to 2.5x (another tokenizer), every
    level is prompt-length through the same checks a live run and --results-dir make."""
    _, results, proof = _recorded()

    def longer(window: int, pod: str, sample: dict[str, float]) -> None:
        for key in ("prompt_tokens", "external_kv_tokens"):  # longer prompts, every one transferred
            if key in sample:
                sample[key] *= 2.5

    assert _codes(_edited(proof, longer), results) == {"prompt-length": [8, 16, 32]}


# --- B11: a lost aiperf summary -------------------------------------------------------------------------------


def _spec(tmp_path: Path) -> str:
    return write_spec(tmp_path, ("threshold: 4096", "threshold: 32"))


def _no_advisor(spec: Any, scenario: Any) -> Any:
    raise SpecError([Problem(field="model", value="stub", message="the stub is not a model", fix="none")])


def _bench(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = main(["bench", *argv, "--json"], seams=Seams(predictor=_no_advisor))
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_a_lost_summary_is_lost_not_zero_tokens_per_second(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    """The recorded run's C=16 summary removed, its records kept (kubelet rotated the log past it, no S3 copy).
    Before: DONE 96, OUT tok/s 0.0, and only 'unchecked'. Now: summary-lost, its throughput null, not 0."""
    folder = tmp_path / "dpd"
    shutil.copytree(DOC_RUN / "dpd", folder)
    (folder / "aiperf_concurrency_16.json").unlink()
    code, document, _ = _bench(capsys, _spec(tmp_path), "--results-dir", str(folder))
    run = document["runs"]["dpd"]
    (level,) = [lv for lv in run["levels"] if lv["concurrency"] == 16]
    lost = [w for w in run["warnings"] if w["code"] == "summary-lost"]
    print(f"bench: C=16 output_tokens_per_s {level['output_tokens_per_s']}, completed {level['completed']}, "
          f"{[w['code'] for w in run['warnings'] if w['concurrency'] == 16]}; truth: 96 answered, summary lost")
    assert code == 1 and level["output_tokens_per_s"] is None and level["summary"] == "lost"
    assert [w["concurrency"] for w in lost] == [16] and "not 0" in lost[0]["message"]
    assert level["completed"] == 96


def test_a_lost_summary_reads_lost_in_the_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "dpd"
    shutil.copytree(DOC_RUN / "dpd", folder)
    (folder / "aiperf_concurrency_16.json").unlink()
    main(["bench", _spec(tmp_path), "--results-dir", str(folder)], seams=Seams(predictor=_no_advisor))
    text = capsys.readouterr().out
    (row,) = [line for line in text.splitlines() if line.split()[:1] == ["16"]][:1]
    assert " lost " in row and " 0.0 " not in row


# --- B12: servers that counted fewer requests than were answered -----------------------------------------------


def test_counters_that_lag_the_level_are_flagged_short(capsys: pytest.CaptureFixture[str]) -> None:
    """The audit's counter lag: the router's and decoder's counters of the first level were read before 40 of its
    106 requests reached them (they update after the quiet window), so the second level's window holds them.
    Before: the first level's DISAGG read 66/66 and nothing said its counts were short."""
    _, results, proof = _recorded()
    late = 40

    def lagging(window: int, pod: str, sample: dict[str, float]) -> None:
        if window == 1:
            for key in ("disaggregated", "prompt_tokens", "generation_tokens", "external_kv_tokens"):
                if key in sample:
                    sample[key] -= late * (sample[key] / 106 if key != "disaggregated" else 1)

    edited = _edited(proof, lagging)
    first = edited.routing()[Load(concurrency=8)]
    codes = _codes(edited, results)
    print(f"bench: C=8 DISAGG {first.disaggregated}/{first.routed}, warnings {codes}; truth: 106 routed")
    assert first.routed == 106 - late and codes["server-count-short"] == [8]
    assert codes.get("other-traffic") == [16]  # the late requests land in the next window: not C=16's own
    (short,) = short_count_warnings([results.levels[0]], {first.load: first})
    assert f"the router routed {106 - late}, but the client got 106 answers" in short.message


# --- B13: one decoder of two at 3x the time per token ----------------------------------------------------------


def test_one_slow_decoder_of_two_is_a_pod_outlier() -> None:
    """The audit's case: decoder 1 at 3x the TPOT of decoder 0 (10 against 30 ms), bench's TPOT p50 20.2 ms, a value
    no request had, and trusted. The recorded run's decoder gets a sibling; each exports its own inter-token latency
    histogram, half the requests each. Now the level is pod-outlier, naming both pods' figures; equal pods stay
    quiet."""
    _, results, proof = _recorded()

    def healthy_decoder(window: int, pod: str, sample: dict[str, float]) -> None:
        if pod.startswith("decoder/"):
            tokens = window * 53 * 15  # each level: 53 requests a decoder, 15 gaps between their 16 tokens
            sample["itl_seconds"], sample["itl_count"] = tokens * 0.010, tokens

    text = json.loads(_edited(proof, healthy_decoder).to_text())
    for window, pods in text["windows"].items():
        tokens = int(window) * 53 * 15
        pods["decoder/decode-dpd-test-7c9-abc"] = {"restarts": 0.0, "itl_seconds": tokens * 0.030,
                                                   "itl_count": float(tokens)}
    sick = RunProof.parse(json.dumps(text))
    codes = _codes(sick, results)
    seen = sick.routing()[Load(concurrency=8)]
    print(f"decoders' own TPOT: {seen.pod_tpot_s}; bench: {codes}")
    assert codes == {"pod-outlier": [8, 16, 32]}
    (warning,) = [w for w in sick.warnings(results, isl=ISL, threshold=THRESHOLD) if w.load == Load(concurrency=8)]
    assert "decoder/decode-dpd-test-7c9-abc 30.0 ms" in warning.message and "3.0x" in warning.message
    for pods in text["windows"].values():
        pods["decoder/decode-dpd-test-7c9-abc"]["itl_seconds"] = pods["decoder/decode-dpd-test-7c9-abc"]["itl_count"] \
            * 0.011
    assert _codes(RunProof.parse(json.dumps(text)), results) == {}
