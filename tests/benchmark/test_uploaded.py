"""Reading back the result files the benchmark Job uploaded (moto's S3)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hyperpod_dpd.benchmark import BenchmarkTarget, ResultsError, S3Location, Scenario, Trust, trust_warnings
from hyperpod_dpd.benchmark.run.cluster import JobLog
from hyperpod_dpd.benchmark.run.job import (
    UPLOAD_FAILED,
    UPLOAD_MANIFEST,
    JobOptions,
    render_benchmark_job,
    results_folder,
)
from hyperpod_dpd.benchmark.run.results import PLAN_FILE, collect
from hyperpod_dpd.benchmark.run.uploaded import read_uploaded, result_files
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.spec.defaults import default_spec

BUCKET, RUN = "results", "20261201-0300"
RESULTS = S3Location(bucket=BUCKET, prefix="benchmarks", region="us-west-2")
FOLDER = f"benchmarks/dpd-test/{RUN}/"


def _put(s3: Any, objects: dict[str, bytes]) -> None:
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    for key, body in objects.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)


def test_every_text_file_of_the_run_folder_by_base_name(s3: Any) -> None:
    """Whatever the extension (the publish script may add .jsonl); not sub-folders, other runs or binary files."""
    _put(s3, {
        f"{FOLDER}a_num_concurrency_2_time_5s.json": b'{"level": 2}',
        f"{FOLDER}requests.jsonl": b'{"id": 1}\n{"id": 2}\n',
        f"{FOLDER}logs/genai_bench.json": b"{}",
        f"{FOLDER}{RUN}_summary.xlsx": b"PK\x03\x04\xff\xfe\x00",
        f"benchmarks/dpd-test/{RUN}-2/other.json": b"{}",
        f"benchmarks/dpd-test-agg/{RUN}/twin.json": b"{}",
    })
    found = read_uploaded(s3, results_folder(RESULTS, "dpd-test", RUN))
    assert found == {"a_num_concurrency_2_time_5s.json": '{"level": 2}', "requests.jsonl": '{"id": 1}\n{"id": 2}\n'}


@pytest.mark.parametrize("prefix", ["benchmarks", "", "team/runs/"])
def test_the_folder_is_where_the_publish_container_uploads(prefix: str) -> None:
    """The folder read back, and the exit code that says the upload failed, are the publish script's own."""
    results = S3Location(bucket=BUCKET, prefix=prefix, region="us-west-2")
    objects = render_benchmark_job(BenchmarkTarget.for_spec(default_spec()), Scenario(),
                                   JobOptions(run_id=RUN, results=results))
    script = next(o for o in objects if o["kind"] == "Job")["spec"]["template"]["spec"]["containers"][0]["command"][2]
    upload = next(line for line in script.splitlines() if line.startswith("aws s3 cp"))
    assert f'"{results_folder(results, "dpd-test", "$RUN_ID").uri}"' in upload
    assert upload.endswith(f"|| code={UPLOAD_FAILED}")
    folder = results_folder(results, "dpd-test", RUN)
    assert folder.uri == f"s3://{BUCKET}/{prefix.strip('/') + '/' if prefix else ''}dpd-test/{RUN}/"
    assert folder.region == "us-west-2"


@pytest.mark.parametrize(("results", "exit_code"), [(None, 0), (RESULTS, None), (RESULTS, UPLOAD_FAILED)])
def test_nothing_uploaded_reads_only_the_log(results: S3Location | None, exit_code: int | None) -> None:
    """No upload asked, a publish container that never finished, or an upload that failed: S3 is not asked."""
    asked: list[str | None] = []

    def s3(region: str | None) -> Any:
        asked.append(region)
        raise AssertionError("S3 read")

    log = JobLog(files={"a.json": "{}"}, exit_code=exit_code)
    notes: list[str] = []
    assert result_files(log, results=results, endpoint="dpd-test", run_id=RUN, s3=s3, note=notes.append) == log.files
    assert asked == [] and notes == []


def test_an_empty_folder_falls_back_to_the_log_with_a_note(s3: Any) -> None:
    _put(s3, {f"benchmarks/dpd-test/{RUN}-2/other.json": b"{}"})
    log = JobLog(files={"a.json": "{}"}, exit_code=0)
    notes: list[str] = []
    found = result_files(log, results=RESULTS, endpoint="dpd-test", run_id=RUN, s3=lambda region: s3,
                         note=notes.append)
    assert found == log.files and notes == [f"no result files in s3://{BUCKET}/{FOLDER}; using the copy in the "
                                            "Job's log"]


def test_the_uploaded_copy_wins_and_the_log_fills_the_gaps(s3: Any) -> None:
    _put(s3, {f"{FOLDER}a.json": b'{"whole": true}', f"{FOLDER}{UPLOAD_MANIFEST}": b"a.json\n"})
    log = JobLog(files={"a.json": '{"who', "b.json": "{}"}, exit_code=1)  # genai-bench failed; the upload did not
    notes: list[str] = []
    found = result_files(log, results=RESULTS, endpoint="dpd-test", run_id=RUN, s3=lambda region: s3,
                         note=notes.append)
    assert found == {"a.json": '{"whole": true}', "b.json": "{}"} and notes == []


STALE = "D64_16_text-to-text_num_concurrency_2_time_99s.json"  # an earlier run's level, same run id
FRESH = "D64_16_text-to-text_num_concurrency_2_time_11s.json"


def _level(ttft_ms: float) -> bytes:
    stats = {name: {"p50": ttft_ms / 1e3, "p90": ttft_ms / 1e3, "p99": ttft_ms / 1e3}
             for name in ("ttft", "tpot", "e2e_latency")}
    stats |= {"num_input_tokens": {"mean": 64}, "num_output_tokens": {"mean": 16}}
    return json.dumps({"aggregated_metrics": {"stats": stats, "num_concurrency": 2, "scenario": "D(64,16)",
                                              "num_completed_requests": 8, "mean_output_throughput_tokens_per_s": 1.0,
                                              "run_duration": 10.0}}).encode()


def test_an_earlier_runs_object_under_the_same_run_id_is_ignored_with_a_note(s3: Any) -> None:
    """The earlier run's ``_time_99s`` file sorts after this run's ``_time_11s`` one: before the manifest it was
    the level bench reported (TTFT p50 9,999 ms, against this run's 500 ms)."""
    _put(s3, {f"{FOLDER}{STALE}": _level(9999), f"{FOLDER}{FRESH}": _level(500),
              f"{FOLDER}{UPLOAD_MANIFEST}": f"{FRESH}\n{PLAN_FILE}\n".encode()})
    notes: list[str] = []
    found = result_files(JobLog(files={}, exit_code=0), results=RESULTS, endpoint="dpd-test", run_id=RUN,
                         s3=lambda region: s3, note=notes.append)
    assert sorted(found) == [FRESH]
    (level,) = collect(found).levels
    assert level.ttft.p50 == 0.5
    assert notes == [f"ignored 1 object(s) in s3://{BUCKET}/{FOLDER} that this run did not upload ({STALE}): an "
                     "earlier run's under the same --run-id"]


def test_a_folder_without_this_runs_manifest_is_not_trusted(s3: Any) -> None:
    """Objects with no manifest beside them cannot be told from an earlier run's: the log's copy is used."""
    _put(s3, {f"{FOLDER}{STALE}": _level(9999)})
    notes: list[str] = []
    log = JobLog(files={FRESH: _level(500).decode()}, exit_code=0)
    found = result_files(log, results=RESULTS, endpoint="dpd-test", run_id=RUN, s3=lambda region: s3,
                         note=notes.append)
    assert found == log.files and f"holds no {UPLOAD_MANIFEST}" in notes[0]


def test_the_publish_script_uploads_its_manifest_of_the_files() -> None:
    objects = render_benchmark_job(BenchmarkTarget.for_spec(default_spec()), Scenario(),
                                   JobOptions(run_id=RUN, results=RESULTS))
    script = next(o for o in objects if o["kind"] == "Job")["spec"]["template"]["spec"]["containers"][0]["command"][2]
    lines = script.splitlines()
    manifest = next(i for i, line in enumerate(lines) if UPLOAD_MANIFEST in line and line.startswith("(cd"))
    upload = next(i for i, line in enumerate(lines) if line.startswith("aws s3 cp"))
    assert manifest < upload and f'--include "{UPLOAD_MANIFEST}"' in lines[upload]


def test_a_cut_s3_copy_gives_way_to_the_logs_whole_one(s3: Any) -> None:
    _put(s3, {f"{FOLDER}{FRESH}": _level(500)[:40], f"{FOLDER}{UPLOAD_MANIFEST}": f"{FRESH}\n".encode()})
    log = JobLog(files={FRESH: _level(500).decode()}, exit_code=0)
    found = result_files(log, results=RESULTS, endpoint="dpd-test", run_id=RUN, s3=lambda region: s3,
                         note=[].append)
    assert found == log.files


def test_a_copy_cut_in_both_places_is_reported_as_its_level_not_an_exit_2() -> None:
    """Before, the ResultsError of the cut file ended the run with exit 2 and no level reported."""
    files = {FRESH: _level(500).decode()[:40], "D64_16_text-to-text_num_concurrency_4_time_9s.json":
             _level(600).decode().replace('"num_concurrency": 2', '"num_concurrency": 4')}
    with pytest.raises(ResultsError):
        collect(files)
    results = collect(files, expected=[Load(concurrency=2), Load(concurrency=4)], tolerant=True)
    assert [level.load for level in results.levels] == [Load(concurrency=4)]
    assert results.missing == (Load(concurrency=2),) and results.unreadable[0].startswith(f"{FRESH}: not JSON")
    (warning,) = trust_warnings(results, Scenario(isl=64, osl=16, concurrency=(2, 4), requests=8, max_seconds=60))
    assert warning.code is Trust.LEVEL_NOT_RUN and f"no readable result: {FRESH}: not JSON" in warning.message


def test_a_level_lost_in_transport_is_not_blamed_on_a_failed_level() -> None:
    """Level 2 is in neither copy while level 4 ran: before, it read "the benchmark stops after a level where every
    request failed, or the run hit its deadline", though no level failed and a later one ran."""
    scenario = Scenario(isl=64, osl=16, concurrency=(2, 4, 8), requests=8, max_seconds=60)
    files = {"D64_16_text-to-text_num_concurrency_4_time_9s.json":
             _level(600).decode().replace('"num_concurrency": 2', '"num_concurrency": 4')}
    results = collect(files, expected=scenario.loads)
    lost, last = trust_warnings(results, scenario)
    assert lost.load == Load(concurrency=2) and lost.message.startswith("the level ran (a later level has results)")
    assert "every request failed" not in lost.message and "neither copy" in lost.message
    assert last.load == Load(concurrency=8) and "or the run hit its deadline" in last.message
