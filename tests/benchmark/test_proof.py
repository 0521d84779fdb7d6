"""The counters a live run writes beside its results (benchmark/proof/proof.py): read back exactly, refused by name."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import fuzz_examples

from hyperpod_dpd.benchmark.proof.disaggregation import DpdCounters, LevelSnapshots
from hyperpod_dpd.benchmark.proof.proof import PROOF_FILE, RunProof, folder_proof, result_hashes, snapshots_proof
from hyperpod_dpd.benchmark.run.levels import ResultsError
from hyperpod_dpd.benchmark.run.route import RoutePath
from hyperpod_dpd.load_point import Load

LOADS = (Load(concurrency=8), Load(rate=2.5))


def _snapshot(done: int) -> DpdCounters:
    router = (f"dpd_routing_disaggregated_total {10 * done}\ndpd_e2e_ttft_seconds_sum {0.5 * 10 * done!r}\n"
              f"dpd_e2e_ttft_seconds_count {10 * done}\n"
              f'dpd_e2e_ttft_seconds_bucket{{le="0.5"}} {10 * done}\ndpd_e2e_ttft_seconds_bucket{{le="+Inf"}} '
              f"{10 * done}\n")
    decoder = (f'vllm:prompt_tokens_by_source_total{{source="external_kv_transfer"}} {640 * done}\n'
               f"vllm:prompt_tokens_total {640 * done}\nvllm:generation_tokens_total {160 * done}\n")
    return DpdCounters.parse({"router-a": router}, {"decode-a": decoder}, restarts={"decoder/decode-a": 1})


FILES = {"aiperf_concurrency_8.json": "{}", "aiperf_rate_2.5.json": "{\"a\": 1}", "notes.txt": "not a result"}


def _proof() -> RunProof:
    snapshots = LevelSnapshots(read=lambda: _snapshot(0), taken={done: _snapshot(done) for done in range(3)})
    return snapshots_proof(snapshots, run_id="r1", endpoint="dpd-test", written_at="2026-12-01T03:00:00Z",
                           path=RoutePath.DPD, loads=LOADS, files=FILES)


def test_a_proof_reads_back_to_the_same_levels() -> None:
    """Every pod's counters, the infinite bucket and a restart count included, survive the file: the levels
    recomputed from it are the live run's, field for field."""
    proof = _proof()
    again = RunProof.parse(proof.to_text())
    assert again == proof and again.routing() == proof.routing()
    (eight, rate) = (proof.routing()[load] for load in LOADS)
    assert (eight.disaggregated, eight.external_kv_tokens, rate.generation_tokens) == (10, 640, 160)
    assert eight.router_ttft_buckets == {0.5: 10.0, float("inf"): 10.0}
    assert set(proof.results) == {"aiperf_concurrency_8.json", "aiperf_rate_2.5.json"}  # results only


def test_a_folder_uses_only_its_own_proof() -> None:
    text = _proof().to_text()
    proof, why = folder_proof({**FILES, PROOF_FILE: text}, endpoint="dpd-test")
    assert proof is not None and why is None
    assert folder_proof(FILES, endpoint="dpd-test") == (None, None)  # no file: nothing to refuse
    proof, why = folder_proof({**FILES, "aiperf_rate_2.5.json": "{}", PROOF_FILE: text}, endpoint="dpd-test")
    assert proof is None and why is not None and "run r1 at 2026-12-01T03:00:00Z" in why
    assert "(aiperf_rate_2.5.json)" in why
    proof, why = folder_proof({**FILES, "aiperf_rate_5.json": "{}", PROOF_FILE: text}, endpoint="dpd-test")
    assert proof is None and "(aiperf_rate_5.json)" in str(why)  # a result file the proof never saw


def test_a_twins_proof_keeps_why_its_counters_were_unread() -> None:
    """The twin's counters file: its windows and why a level's counters could not be read survive the file, so the
    verdicts recomputed from it are the live run's. A DPD file, with nothing unread, has no such key."""
    snapshots = LevelSnapshots(read=lambda: _snapshot(0), taken={0: _snapshot(0), 1: _snapshot(1)})  # rate: unread
    proof = snapshots_proof(snapshots, run_id="r1", endpoint="dpd-test-agg", written_at="2026-12-01T03:00:00Z",
                            path=RoutePath.DPD, loads=LOADS, files=FILES, unread="pods/proxy is forbidden")
    again = RunProof.parse(proof.to_text())
    assert again == proof and again.unread == "pods/proxy is forbidden"
    assert "unread" not in json.loads(_proof().to_text())
    nothing = snapshots_proof(None, run_id="r1", endpoint="dpd-test-agg", written_at="2026-12-01T03:00:00Z",
                              path=RoutePath.DPD, loads=LOADS, files=FILES, unread="no status.selector")
    assert RunProof.parse(nothing.to_text()) == nothing and nothing.routing() == {}


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(format=2), "not a bench counters file of format 1"),
    (lambda d: d.pop("run_id"), "'run_id' is missing"),
    (lambda d: d.update(path="sideways"), "'path' is missing or not one of its values"),
    (lambda d: d.update(levels=[{"concurrency": "8"}]), "a level is"),
    (lambda d: d["windows"].update({"x": {}}), "window 'x' is not a level count"),
    (lambda d: d["windows"].update({"\u00b2": {}}), "is not a level count"),  # a digit to str.isdigit, not to int
    (lambda d: d["windows"]["0"].update({"router/p": {"disaggregated": "ten"}}), "names to finite numbers"),
    (lambda d: d.update(result_files_sha256={"a.json": 3}), "maps file names to hex digests"),
    (lambda d: d.update(unread=["a read failed"]), "'unread' is why the counters could not be read"),
])
def test_a_bad_proof_is_a_results_error_naming_the_key(change: Any, message: str) -> None:
    document = json.loads(_proof().to_text())
    change(document)
    with pytest.raises(ResultsError) as caught:
        RunProof.parse(json.dumps(document))
    assert str(caught.value).startswith(f"{PROOF_FILE}: ") and message in str(caught.value)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                 max_size=4), max_leaves=20)


@settings(max_examples=fuzz_examples(200))
@given(key=st.sampled_from(["format", "run_id", "endpoint", "written_at", "path", "levels", "windows",
                            "result_files_sha256"]), value=JSON, raw=st.text(max_size=40))
def test_any_file_is_a_proof_or_a_results_error(key: str, value: Any, raw: str) -> None:
    """Whatever a folder holds under the proof's name: read, or refused with a note; never another exception."""
    document = json.loads(_proof().to_text())
    document[key] = value
    for text in (json.dumps(document), raw):
        try:
            RunProof.parse(text)
        except ResultsError:
            continue
        proof, why = folder_proof({PROOF_FILE: text}, endpoint="dpd-test")
        assert proof is not None or why


def test_hashes_are_of_the_utf8_text_as_written() -> None:
    """The same text a folder's copy holds (read as UTF-8) hashes the same; a changed byte does not."""
    assert result_hashes({"a.json": "\u00e9"})["a.json"] == hashlib.sha256(b"\xc3\xa9").hexdigest()
    assert result_hashes({"a.json": "{}"}) != result_hashes({"a.json": "{} "})
