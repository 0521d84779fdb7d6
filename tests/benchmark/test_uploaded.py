"""Reading back the result files the benchmark Job uploaded (moto's S3)."""

from __future__ import annotations

from typing import Any

import pytest

from hyperpod_dpd.benchmark import BenchmarkTarget, S3Location, Scenario
from hyperpod_dpd.benchmark.cluster import JobLog
from hyperpod_dpd.benchmark.job import UPLOAD_FAILED, JobOptions, render_benchmark_job, results_folder
from hyperpod_dpd.benchmark.uploaded import read_uploaded, result_files
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
    _put(s3, {f"{FOLDER}a.json": b'{"whole": true}'})
    log = JobLog(files={"a.json": '{"who', "b.json": "{}"}, exit_code=1)  # genai-bench failed; the upload did not
    notes: list[str] = []
    found = result_files(log, results=RESULTS, endpoint="dpd-test", run_id=RUN, s3=lambda region: s3,
                         note=notes.append)
    assert found == {"a.json": '{"whole": true}', "b.json": "{}"} and notes == []
