"""The server's side of a run, kept with its results: the counter snapshots bench read in the quiet windows.

A live run reads the router's, decoders' and prefillers' counters through the API server, between the
levels; the Job's folder holds only the client's files. So that ``--results-dir`` reaches the same
verdicts as the live run (which path each level took, whether the KV cache arrived, how much of TTFT
was the client's, from the same server figures), ``bench`` writes every snapshot into
:data:`PROOF_FILE` beside the results: into the run's S3 folder (next to what the Job uploaded) and,
with ``--report-dir``, into the run's local copy there. The aggregated twin's folder gets its own, of its
router's and engine pods' counters, so that ``--aggregated-results-dir`` reaches the twin's verdicts again
(:meth:`RunProof.twin_warnings`).

A proof names its run (run id, endpoint, the UTC time bench wrote it) and the sha256 of every result
file it was checked against. A folder's proof is used only when those hashes are exactly the folder's
result files: a proof left by an earlier run under the same ``--run-id``, or a folder whose files were
changed or mixed with another run's, is refused with a note naming its run id and time, and the folder
is reported unchecked, as one with no proof.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hyperpod_dpd.benchmark.proof.counts import prompt_length_warnings, short_count_warnings, sibling_warnings
from hyperpod_dpd.benchmark.proof.disaggregation import (
    DpdCounters,
    LevelDisaggregation,
    LevelSnapshots,
    RouterEstimates,
    disaggregation_warnings,
    restart_warnings,
)
from hyperpod_dpd.benchmark.proof.overhead import overhead_warnings, twin_ttft
from hyperpod_dpd.benchmark.proof.traffic import other_traffic_warnings
from hyperpod_dpd.benchmark.proof.trust import Trust, TrustWarning
from hyperpod_dpd.benchmark.run.levels import ResultsError
from hyperpod_dpd.benchmark.run.results import BenchmarkResults
from hyperpod_dpd.benchmark.run.route import RoutePath
from hyperpod_dpd.load_point import Load

PROOF_FILE = "hyperpod-dpd-counters.json"
FORMAT = 1  # the file's version: a later bench that changes the shape raises it and refuses older files by name
MISSED = "a quiet window was missed"  # why a level's counters are unread when no read failed: no poll saw it


def result_hashes(files: Mapping[str, str]) -> dict[str, str]:
    """The sha256 of each result file (``.json``/``.jsonl``, the proof itself left out), by name."""
    return {name: hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in sorted(files.items())
            if name != PROOF_FILE and name.endswith((".json", ".jsonl"))}


def _load(value: Any, where: str) -> Load:
    if isinstance(value, Mapping) and isinstance(value.get("concurrency"), int) and len(value) == 1:
        return Load(concurrency=value["concurrency"])
    if isinstance(value, Mapping) and isinstance(value.get("request_rate"), int | float) and len(value) == 1:
        return Load(rate=float(value["request_rate"]))
    raise ResultsError(f"{where}: a level is {{'concurrency': N}} or {{'request_rate': R}}, not {value!r}")


def _sample(value: Any, where: str) -> dict[str, float]:
    if not isinstance(value, Mapping) or not all(
            isinstance(key, str) and isinstance(count, int | float) and not isinstance(count, bool)
            and math.isfinite(count) for key, count in value.items()):
        raise ResultsError(f"{where}: a pod's counters are names to finite numbers")
    return {key: float(count) for key, count in value.items()}


@dataclass(frozen=True, kw_only=True)
class RunProof:
    """One endpoint's counter snapshots for one run: window ``i`` was read after ``i`` levels (run order)."""

    run_id: str
    endpoint: str
    written_at: str  # UTC, ISO 8601: which of two runs under one run id wrote it
    path: RoutePath
    loads: tuple[Load, ...]
    windows: Mapping[int, DpdCounters]
    results: Mapping[str, str] = field(default_factory=dict)  # the sha256 of every result file it checked
    # why counters could not be read (the pods not found, or the last read's error), for the levels left unmeasured;
    # written only when set (key ``unread``), so a file without it is still of format 1
    unread: str = ""

    def routing(self) -> dict[Load, LevelDisaggregation]:
        """Each level's counts, windowed exactly as the live run windowed them."""
        return LevelSnapshots(read=_unread, taken=dict(self.windows)).levels(self.loads)

    def warnings(self, results: BenchmarkResults, *, isl: int, threshold: int,
                 estimates: RouterEstimates | None = None, osl: int = 0,
                 max_model_len: int | None = None) -> list[TrustWarning]:
        """The server-side verdicts on ``results``: the path and KV checks, the client-overhead bound, and other
        clients' traffic. ``estimates`` are the router's own logged estimates (a live run reads them; a results
        folder has none, so its fix names the threshold without them)."""
        routing = self.routing()
        return (disaggregation_warnings(
            self.path, list(results.loads), routing, isl=isl, threshold=threshold,
            prompt_tokens={level.load: level.mean_input_tokens for level in results.levels}, estimates=estimates,
            osl=osl, max_model_len=max_model_len)
            + overhead_warnings(results.levels, routing)
            + other_traffic_warnings(results.levels, routing)
            + short_count_warnings(results.levels, routing)
            + sibling_warnings(results.levels, routing)
            + prompt_length_warnings(results.levels, routing, isl=isl))

    def twin_warnings(self, results: BenchmarkResults) -> list[TrustWarning]:
        """The aggregated twin's server-side verdicts on ``results``, from its router's and engine pods' counters: a
        level whose counters were not read around it is unverified (with why), the others' TTFT is bounded against
        the twin's own clock (:func:`~hyperpod_dpd.benchmark.proof.overhead.twin_ttft`), and other clients' traffic and
        restarted pods are reported. Its path is not in question (it has no prefillers), so no path or KV checks."""
        server = self.routing()
        unread = self.unread or MISSED
        return ([TrustWarning(code=Trust.OVERHEAD_UNKNOWN, load=level.load, message=(
            f"the twin's router and engine counters could not be read around this level ({unread}), so nothing "
            "shows how much of its TTFT is the client's: TTFT here is the benchmark pod's, unverified"))
            for level in results.levels if level.load not in server and level.answered]
            + overhead_warnings(results.levels, server, clock=twin_ttft)
            + other_traffic_warnings(results.levels, server)
            + short_count_warnings(results.levels, server)
            + restart_warnings(server))

    def to_text(self) -> str:
        document = {"format": FORMAT, "run_id": self.run_id, "endpoint": self.endpoint, "written_at": self.written_at,
                    "path": self.path.value, "levels": [load.as_dict() for load in self.loads],
                    "result_files_sha256": dict(sorted(self.results.items())),
                    "windows": {str(window): dict(sorted(counters.pods.items()))
                                for window, counters in sorted(self.windows.items())},
                    **({"unread": self.unread} if self.unread else {})}
        return json.dumps(document, indent=1, sort_keys=False) + "\n"

    @classmethod
    def parse(cls, text: str, *, where: str = PROOF_FILE) -> RunProof:
        """A proof file's text; :class:`ResultsError` naming the key when it is not one."""
        try:
            data = json.loads(text)
        except ValueError as err:
            raise ResultsError(f"{where}: not JSON ({err})") from None
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise ResultsError(f"{where}: not a bench counters file of format {FORMAT} (format "
                               f"{data.get('format') if isinstance(data, Mapping) else None!r})")
        texts = {key: data.get(key) for key in ("run_id", "endpoint", "written_at", "path")}
        bad = sorted(key for key, value in texts.items() if not isinstance(value, str))
        if bad or texts["path"] not in {p.value for p in RoutePath}:
            raise ResultsError(f"{where}: '{(bad or ['path'])[0]}' is missing or not one of its values")
        levels, windows, hashes = data.get("levels"), data.get("windows"), data.get("result_files_sha256")
        if not isinstance(levels, list) or not isinstance(windows, Mapping) or not isinstance(hashes, Mapping):
            raise ResultsError(f"{where}: 'levels' is a list, 'windows' and 'result_files_sha256' objects")
        parsed: dict[int, DpdCounters] = {}
        for window, pods in windows.items():
            if not (str(window).isascii() and str(window).isdigit()) or not isinstance(pods, Mapping):
                raise ResultsError(f"{where}: window {window!r} is not a level count with its pods")
            parsed[int(window)] = DpdCounters(pods={str(pod): _sample(sample, f"{where}: window {window}, {pod}")
                                                    for pod, sample in pods.items()})
        if not all(isinstance(name, str) and isinstance(digest, str) for name, digest in hashes.items()):
            raise ResultsError(f"{where}: 'result_files_sha256' maps file names to hex digests")
        unread = data.get("unread", "")
        if not isinstance(unread, str):
            raise ResultsError(f"{where}: 'unread' is why the counters could not be read, a string")
        return cls(run_id=str(texts["run_id"]), endpoint=str(texts["endpoint"]), written_at=str(texts["written_at"]),
                   path=RoutePath(texts["path"]), loads=tuple(_load(level, where) for level in levels),
                   windows=parsed, results=dict(hashes), unread=unread)

    def mismatch(self, files: Mapping[str, str]) -> str | None:
        """Why this proof is not the one of ``files`` (their hashes differ from those it checked), or None."""
        mine, theirs = dict(self.results), result_hashes(files)
        if mine == theirs:
            return None
        changed = sorted(name for name in set(mine) | set(theirs) if mine.get(name) != theirs.get(name))
        return (f"{PROOF_FILE} was written by run {self.run_id} at {self.written_at} for result files that differ "
                f"from this folder's ({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''}): an earlier "
                "run's under the same --run-id, or a folder changed since, so its counters are not used")


def _unread() -> DpdCounters:
    raise AssertionError("a proof's windows are all read already")  # LevelSnapshots.levels never reads


def folder_proof(files: Mapping[str, str], *, endpoint: str) -> tuple[RunProof | None, str | None]:
    """The proof of a results folder's ``files`` and None, or None and why not (None, None: it holds none)."""
    text = files.get(PROOF_FILE)
    if text is None:
        return None, None
    try:
        proof = RunProof.parse(text)
    except ResultsError as err:
        return None, f"{err}; its counters are not used"
    if proof.endpoint != endpoint:
        return None, (f"{PROOF_FILE} holds endpoint {proof.endpoint}'s counters (run {proof.run_id}), not "
                      f"{endpoint}'s; they are not used")
    why = proof.mismatch(files)
    return (None, why) if why else (proof, None)


def snapshots_proof(snapshots: LevelSnapshots | None, *, run_id: str, endpoint: str, written_at: str,
                    path: RoutePath, loads: Sequence[Load], files: Mapping[str, str], unread: str = "") -> RunProof:
    """What a live run read, as the proof it writes beside ``files``; ``snapshots`` None: nothing could be read
    (``unread`` says why), which the proof records too, so a folder re-read says the same."""
    return RunProof(run_id=run_id, endpoint=endpoint, written_at=written_at, path=path, loads=tuple(loads),
                    windows=dict(snapshots.taken) if snapshots is not None else {}, results=result_hashes(files),
                    unread=unread)
