"""The aggregated twin's counters kept with its results (benchmark/proof/proof.py): ``--aggregated-results-dir`` on
the twin's folder gives the live run's twin verdicts, server clock and exit status again, and refuses a file that is
not its own.

Each live run is the real ``bench`` CLI against test_server_truth.py's recorded A/B cluster (the twin's router and
engine pods answer with a stub run's counters), with the Jobs' uploads in moto's S3.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from benchmark import test_server_truth as truth  # its recorded A/B cluster
from botocore.stub import Stubber
from support import FakeClock

from hyperpod_dpd.benchmark.proof.proof import PROOF_FILE
from hyperpod_dpd.benchmark.run.job import UPLOAD_MANIFEST
from hyperpod_dpd.cli import main
from hyperpod_dpd.clients.aws import AwsClients
from hyperpod_dpd.clients.seams import Seams

RUN = truth.RUN
BUCKET = "dpd-models-example"  # the default spec's model bucket: the Jobs upload under its benchmarks/
FOLDERS = {"dpd": f"benchmarks/dpd-test/{RUN}/", "aggregated": f"benchmarks/dpd-test-agg/{RUN}/"}
TRAFFIC = tuple(arg for arg in truth.TRAFFIC if arg != "--no-upload")  # the default: each Job uploads its folder
TWIN_COUNTERS = "twin's router and engine counters"


def _aws(client: Any) -> Any:
    return lambda region, profile: AwsClients(region=region or "us-west-2",
                                              factory=lambda service, region_name: client)


def _uploaded(s3: Any, files: Mapping[str, str]) -> None:
    """What each Job's publish container uploads, in moto's S3: its result files under its endpoint's run folder."""
    s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    for prefix in FOLDERS.values():
        for name, body in files.items():
            s3.put_object(Bucket=BUCKET, Key=prefix + name, Body=body.encode())
        s3.put_object(Bucket=BUCKET, Key=prefix + UPLOAD_MANIFEST, Body="\n".join(files).encode())


def _downloaded(s3: Any, prefix: str, folder: Path) -> Path:
    """A run's S3 folder copied to ``folder``, as ``aws s3 cp --recursive`` would."""
    folder.mkdir(parents=True)
    for item in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]:
        (folder / item["Key"].removeprefix(prefix)).write_bytes(
            s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read())
    return folder


def _bench(capsys: pytest.CaptureFixture[str], *argv: str, kube: Any = None, s3: Any = None) -> tuple[int, str, str]:
    clock = FakeClock()
    code = main(["bench", *argv], seams=Seams(benchmark_kube=lambda context, config: kube, clock=clock,
                                                sleep=clock.sleep, aws_clients=_aws(s3)))
    out, err = capsys.readouterr()
    return code, out, err


def _live(capsys: pytest.CaptureFixture[str], fakes: ModuleType, dpd: Any, twin: Any | None, spec: str, *,
          report: Path, s3: Any, **cluster: Any) -> tuple[int, dict[str, Any]]:
    """A live A/B run whose Jobs uploaded their folders, with --report-dir: its exit status and JSON."""
    _uploaded(s3, dpd.files())
    code, out, err = _bench(capsys, spec, *TRAFFIC, "--aggregated", "--json", "--report-dir", str(report),
                            kube=truth.ab_cluster(fakes, dpd, twin, **cluster), s3=s3)
    assert "cannot write" not in err, err
    return code, json.loads(out)


TWIN_FAULTS = {  # a twin fault only its router's and engine pods' counters show: the cluster, the warning it gives
    "other-traffic": ({}, "other-traffic"),  # a second client on the twin during its first level
    "no-server-clock": ({"twin_engine": truth._no_engine_ttft}, "client-overhead-unknown"),
    "pods-not-found": ({"no_selector": ("dpd-test-agg",)}, "client-overhead-unknown"),
    "engine-restarted": ({"twin_restarting": True}, "pod-restarted"),
}


@pytest.mark.parametrize("fault", sorted(TWIN_FAULTS))
def test_a_twin_folder_gives_the_live_twin_verdicts_again(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                                          healthy_run: Any, shared_run: Any, stub_spec: str,
                                                          *, tmp_path: Path, s3: Any, fault: str) -> None:
    """The live A/B exits 1 on a twin fault only the twin's counters show. Its twin folder, downloaded from S3 or
    under --report-dir, then gives the same twin warnings (their messages, the unread reason included), the same
    A/B verdicts and exit 1. Before, the twin's folder held no counters: its levels were 'unchecked', the warnings
    gone and the exit status 0."""
    cluster, code_expected = TWIN_FAULTS[fault]
    twin_run = healthy_run if fault == "engine-restarted" else shared_run
    code, live = _live(capsys, fakes, healthy_run, twin_run, stub_spec, report=tmp_path / "report", s3=s3,
                       **cluster)
    twin = live["runs"]["aggregated"]
    assert code == 1 and code_expected in {w["code"] for w in twin["warnings"]}, twin["warnings"]
    written = json.loads(s3.get_object(Bucket=BUCKET, Key=FOLDERS["aggregated"] + PROOF_FILE)["Body"].read())
    assert (written["run_id"], written["endpoint"]) == (RUN, "dpd-test-agg")
    if fault == "pods-not-found":  # nothing read, and why, kept: the re-read says the same
        assert written["windows"] == {} and "has no status.selector" in written["unread"]
    downloaded = {label: _downloaded(s3, prefix, tmp_path / "downloaded" / label) for label, prefix in FOLDERS.items()}
    reported = {label: tmp_path / "report" / "runs" / label for label in FOLDERS}
    for folders in (downloaded, reported):
        again_code, out, err = _bench(capsys, stub_spec, "--results-dir", str(folders["dpd"]),
                                      "--aggregated-results-dir", str(folders["aggregated"]), "--json")
        again = json.loads(out)
        reread = again["runs"]["aggregated"]
        assert reread["warnings"] == twin["warnings"], err
        assert reread["server_clock"] == twin["server_clock"] and "unchecked" not in reread
        assert again_code == code == 1
        assert [row["unverified"] for row in again["ab"]] == [row["unverified"] for row in live["ab"]]


def test_the_twins_server_clock_is_shown_again_from_its_folder(capsys: pytest.CaptureFixture[str],
                                                               fakes: ModuleType, healthy_run: Any, shared_run: Any,
                                                               stub_spec: str, *, tmp_path: Path, s3: Any) -> None:
    """The twin's client TTFT against its own server clock (its router's histogram here), per level: the same rows
    in the re-read's JSON ``server_clock`` and its table as in the live run's. Before: no such rows on re-read."""
    _, live = _live(capsys, fakes, healthy_run, shared_run, stub_spec, report=tmp_path / "report", s3=s3,
                    twin_router=str)
    rows = live["runs"]["aggregated"]["server_clock"]
    assert [row["server_ttft"]["series"] for row in rows] == ["dpd_e2e_ttft_seconds"] * 2
    folders = ("--results-dir", str(tmp_path / "report" / "runs" / "dpd"),
               "--aggregated-results-dir", str(tmp_path / "report" / "runs" / "aggregated"))
    _, out, _ = _bench(capsys, stub_spec, *folders, "--json")
    assert json.loads(out)["runs"]["aggregated"]["server_clock"] == rows
    _, text, _ = _bench(capsys, stub_spec, *folders)
    block = text[text.index("aggregated: the client's TTFT against the server's own clock"):].splitlines()
    assert [line.split()[:2] for line in block[2:4]] == [["2", "dpd_e2e_ttft_seconds"], ["4", "dpd_e2e_ttft_seconds"]]


def test_a_twin_counters_file_not_its_own_is_refused_with_why(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                                              healthy_run: Any, shared_run: Any, stub_spec: str, *,
                                                              tmp_path: Path, s3: Any) -> None:
    """The DPD endpoint's counters file in the twin's folder, or the twin's own beside result files changed since:
    each is named with why, and the twin is reported as a folder without counters (unchecked, no server clock, its
    other-traffic verdict not claimed), never with those counters."""
    _live(capsys, fakes, healthy_run, shared_run, stub_spec, report=tmp_path / "report", s3=s3)
    runs = tmp_path / "report" / "runs"
    twin = runs / "aggregated"
    own, dpd = (twin / PROOF_FILE).read_text(), (runs / "dpd" / PROOF_FILE).read_text()
    written = json.loads(own)["written_at"]
    level = next(name for name in sorted(p.name for p in twin.iterdir()) if "_num_concurrency_2_" in name)
    original = (twin / level).read_text()
    cases = {
        "foreign": (dpd, original, f"holds endpoint dpd-test's counters (run {RUN}), not dpd-test-agg's"),
        "stale": (own, original + "\n", f"was written by run {RUN} at {written} for result files that differ from "
                                        f"this folder's ({level})"),
    }
    for proof_text, level_text, why in cases.values():
        (twin / PROOF_FILE).write_text(proof_text)
        (twin / level).write_text(level_text)
        folders = ("--results-dir", str(runs / "dpd"), "--aggregated-results-dir", str(twin))
        _, out, err = _bench(capsys, stub_spec, *folders, "--json")
        reread = json.loads(out)["runs"]["aggregated"]
        assert why in reread["unchecked"] and "Traceback" not in err
        assert "server_clock" not in reread and "other-traffic" not in {w["code"] for w in reread["warnings"]}
        _, printed, err = _bench(capsys, stub_spec, *folders)
        assert f"{twin}: {PROOF_FILE} " in err and why in err and why in printed
        assert "aggregated: the client's TTFT against the server's own clock" not in printed


def test_a_twin_counters_file_s3_refuses_is_a_note_naming_whose(capsys: pytest.CaptureFixture[str],
                                                                fakes: ModuleType, healthy_run: Any,
                                                                stub_spec: str) -> None:
    """S3 refuses both writes: each note names whose counters and the option that re-reads that folder."""
    import boto3

    client = boto3.client("s3", region_name="us-west-2", aws_access_key_id="testing", aws_secret_access_key="testing")
    stub = Stubber(client)
    for _ in FOLDERS:  # each endpoint: its uploaded files read back (refused: the log's copy), then its counters
        stub.add_client_error("list_objects_v2", "AccessDenied", "Access Denied", 403)
        stub.add_client_error("put_object", "AccessDenied", "Access Denied", 403)
    stub.activate()
    _, _, err = _bench(capsys, stub_spec, *TRAFFIC, "--aggregated", "--json",
                       kube=truth.ab_cluster(fakes, healthy_run), s3=client)
    key = f"s3://{BUCKET}/{FOLDERS['aggregated']}{PROOF_FILE}"
    assert (f"cannot write the {TWIN_COUNTERS} to {key} (access denied on PutObject; the caller needs s3:PutObject "
            f"on {key}); --aggregated-results-dir on that folder will report its levels unchecked") in err
    assert f"cannot write the router and decoder counters to s3://{BUCKET}/{FOLDERS['dpd']}{PROOF_FILE}" in err
