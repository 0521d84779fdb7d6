"""The bench request as values: the stack read only when a Job is planned, and a replay's refused level options."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperpod_dpd.benchmark import session
from hyperpod_dpd.benchmark.replay.replay_run import level_options
from hyperpod_dpd.benchmark.request import BenchRequest, BenchTraffic, BuyerOptions, Runs
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.clients.aws import AwsClients
from hyperpod_dpd.clients.seams import Seams
from hyperpod_dpd.contracts.stack_outputs import DeployedSource
from hyperpod_dpd.errors import UsageError
from hyperpod_dpd.spec.defaults import default_spec

DOC_RUN = Path(__file__).resolve().parent / "data" / "doc-run"


def _no_aws(region: str | None, profile: str | None, *, fallback_region: str | None = None) -> AwsClients:
    raise AssertionError("no AWS call was expected")


def test_results_folders_need_no_stack(tmp_path: Path) -> None:
    """A stack that cannot be read stops a Job being planned, never a report of results folders."""
    gone = DeployedSource(outputs_file=str(tmp_path / "outputs.json"))
    seams = Seams(aws_clients=_no_aws)
    folders = BenchRequest(spec=default_spec(), quiet=True, deployed=gone,
                           runs=Runs(results_dirs=(str(DOC_RUN / "dpd"),)))
    assert [outcome.endpoint for outcome in session.run(folders, seams=seams).outcomes] == ["dpd-test"]
    with pytest.raises(UsageError, match=r"^cannot read the deployed stack:\n  - --outputs-file: cannot be read"):
        session.plan(BenchRequest(spec=default_spec(), deployed=gone), seams=seams)


@pytest.mark.parametrize(("request_", "refused"), [
    (BenchRequest(spec=default_spec()), []),
    (BenchRequest(spec=default_spec(), traffic=BenchTraffic(concurrency=(8, 16, 32))), []),
    (BenchRequest(spec=default_spec(), traffic=BenchTraffic(concurrency=(4,))), ["--concurrency/--request-rate"]),
    (BenchRequest(spec=default_spec(), traffic=BenchTraffic(concurrency=(), request_rates=(1.0,))),
     ["--concurrency/--request-rate"]),
    (BenchRequest(spec=default_spec(), traffic=BenchTraffic(client=Client.GENAI_BENCH, osl=64),
                  runs=Runs(aggregated_results_dirs=("twin",)), buyer=BuyerOptions(repeat=2)),
     ["--osl", "--client", "--results-dir", "--repeat"]),
], ids=["defaults", "default-levels", "levels", "rates", "others"])
def test_a_replay_names_the_level_options_set(request_: BenchRequest, refused: list[str]) -> None:
    assert level_options(request_) == refused
