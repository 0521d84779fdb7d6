"""The deploy order for the weights is stated once, in the same words, on every page that deploys, and the
command blocks follow it: an S3 source's weights are synced before ``cdk deploy``, which then uses that
bucket (``-c model_bucket=``); nothing in the deploy waits for an S3 prefix to fill."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", REPO / "docs" / "deploy.md", REPO / "docs" / "zero-to-endpoint.md"]
RULE = re.compile(r"\*\*Weights before the endpoint:.*?\*\*", re.DOTALL)


def rule(page: Path) -> str:
    found = RULE.findall(page.read_text(encoding="utf-8"))
    assert len(found) == 1, f"{page.name} states the weights order {len(found)} times"
    return " ".join(found[0].split())


def test_every_deploy_page_states_the_same_order() -> None:
    rules = {page.name: rule(page) for page in PAGES}
    assert len(set(rules.values())) == 1, rules
    (text,) = set(rules.values())
    assert "before `cdk deploy`" in text and "-c model_bucket=" in text


@pytest.mark.parametrize("page", PAGES[:2], ids=lambda p: p.name)
def test_the_commands_sync_the_weights_before_the_deploy(page: Path) -> None:
    blocks = "\n".join(re.findall(r"```(?:sh|bash)\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL))
    lines = [line.strip() for line in blocks.splitlines()]
    sync = next(i for i, line in enumerate(lines) if line.startswith("aws s3 sync"))
    deploy = next(i for i, line in enumerate(lines) if line.startswith("cdk deploy"))
    assert sync < deploy, f"{page.name}: the endpoint would be applied to an empty prefix"
    command = []
    for line in lines[deploy:]:
        command.append(line)
        if not line.endswith("\\"):
            break
    assert "-c model_bucket=BUCKET" in " ".join(command), "the deploy uses the bucket the weights are in"


def test_no_page_claims_the_endpoint_waits_for_s3_weights() -> None:
    for page in PAGES:
        text = " ".join(page.read_text(encoding="utf-8").split())
        assert "restart with back-off; `verify` waits for them" not in text, page.name
