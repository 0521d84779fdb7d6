"""On a cluster the stack did not create, deploy and destroy touch only what the stack made.

aws-cdk-lib's own kubectl and Helm handlers (Python, extracted from the installed package's jsii tarball
at test time) run the stack's synthesized custom resources, create then delete, against fake ``kubectl``,
``helm`` and ``aws`` executables and a fake EKS (``fake_eks.py``) that hold another team's namespace,
objects, HyperPod dependency releases, benchmark ServiceAccount and add-ons. Every call is recorded.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib.util
import os
import re
import sys
import tarfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk as cdk
import pytest
from cdk import fake_eks
from cdk.cdk_support import (
    EXISTING_OIDC_PROVIDER,
    EXISTING_VPC,
    HYPERPOD_SUBNETS,
    REGION,
    second_spec,
    synthesize,
    with_bucket,
)

from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import ExistingEksCluster, HyperPodDpdStack
from hyperpod_dpd_cdk.ownership import MAX_RELEASE_NAME, per_stack_name

HERE = Path(__file__).resolve().parent
HANDLERS = "package/custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/"
THEIR_NAMESPACE = "team-a"  # another team's namespace, which our first endpoint also serves in
OUR_NAMESPACE = "dpd-shared"  # absent from the cluster: the stack creates it
KUBE_SYSTEM = "kube-system"
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def theirs(obj: dict[str, Any]) -> dict[str, Any]:
    return {"owner": "theirs", "body": obj}


def tenant_state() -> dict[str, Any]:
    """Another team's things on the shared cluster: a namespace with an endpoint and a ConfigMap, another
    hyperpod-dpd stack's benchmark ServiceAccount there, and a HyperPod setup's releases in kube-system."""
    state: dict[str, Any] = fake_eks.empty_state()
    for obj in ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": THEIR_NAMESPACE}},
                {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
                 "metadata": {"name": "their-endpoint", "namespace": THEIR_NAMESPACE}},
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "their-config",
                                                                        "namespace": THEIR_NAMESPACE}},
                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {
                    "name": "hyperpod-dpd-bench", "namespace": THEIR_NAMESPACE,
                    "annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/theirs"}}}):
        state["objects"][fake_eks.object_key(obj)] = theirs(obj)
    for release in ("hyperpod-dependencies", "nvidia-device-plugin", "aws-efa-k8s-device-plugin"):
        state["releases"][f"{KUBE_SYSTEM}/{release}"] = {"owner": "theirs", "chart": release, "values": {},
                                                         "revision": 1}
    return state


@pytest.fixture(scope="module")
def handlers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Callable[..., object]]:
    """aws-cdk-lib's apply and helm handlers, from the tarball of the installed aws-cdk-lib."""
    jsii_dir = Path(importlib.util.find_spec("aws_cdk._jsii").origin).parent  # type: ignore[union-attr,arg-type]
    (tarball,) = jsii_dir.glob("aws-cdk-lib@*.jsii.tgz")
    root = tmp_path_factory.mktemp("handlers")
    with tarfile.open(tarball) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(HANDLERS) and m.isfile()]
        archive.extractall(root, members=members, filter="data")
    os.environ["TEST_OUTDIR"] = str(tmp_path_factory.mktemp("handler-out"))  # read once, at import
    path = os.environ["PATH"]
    try:
        modules = {kind: _load(f"cdk_kubectl_{name}", root / HANDLERS / name / "__init__.py")
                   for kind, name in ((fake_eks.KUBECTL_RESOURCE, "apply"), (fake_eks.HELM_CHART, "helm"))}
    finally:
        os.environ["PATH"] = path  # the handlers prepend the kubectl layer's folders at import
    return {fake_eks.KUBECTL_RESOURCE: modules[fake_eks.KUBECTL_RESOURCE].apply_handler,
            fake_eks.HELM_CHART: modules[fake_eks.HELM_CHART].helm_handler}


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():  # upstream's regular expressions are plain strings with backslashes
        warnings.simplefilter("ignore", DeprecationWarning)
        spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``aws``, ``kubectl`` and ``helm`` that act on the fake cluster."""
    folder = tmp_path_factory.mktemp("bin")
    for tool in ("aws", "kubectl", "helm"):
        script = folder / tool
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "fake_eks.py"}" {tool} "$@"\n')
        script.chmod(0o755)
    return folder


@contextlib.contextmanager
def on_path(folder: Path, state_file: Path) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ["PATH"] = f"{folder}{os.pathsep}{os.environ['PATH']}"
    os.environ[fake_eks.STATE_ENV] = str(state_file)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def shared_stack(cdk_context: dict[str, Any], prepared_chart: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two endpoints on an existing cluster: one in the other team's (declared) namespace, one in a namespace
    of the stack's own; the prepared HyperPod dependency chart."""
    app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("shared")))
    stack = HyperPodDpdStack(
        app, "OnSharedCluster", env=cdk.Environment(region=REGION),
        endpoints=[with_bucket(dataclasses.replace(default_spec(), namespace=THEIR_NAMESPACE), "my-weights"),
                   dataclasses.replace(second_spec(), namespace=OUR_NAMESPACE)], model_bucket_name="my-weights",
        vpc=EXISTING_VPC, hyperpod_subnet_ids=HYPERPOD_SUBNETS, dependency_chart_dir=prepared_chart,
        existing_cluster=ExistingEksCluster(
            cluster_name="platform", oidc_issuer_url="https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B7",
            oidc_provider_arn=EXISTING_OIDC_PROVIDER, namespaces=(THEIR_NAMESPACE,)))
    return synthesize(app, stack)


@dataclasses.dataclass
class Run:
    deployment: Any
    cluster: Any
    deployed: bool
    after_deploy: dict[str, Any]
    final: dict[str, Any]


Simulate = Callable[..., Run]


@pytest.fixture(scope="module")
def simulate(handlers: dict[str, Callable[..., object]], fake_bin: Path,
             tmp_path_factory: pytest.TempPathFactory) -> Simulate:
    def simulate(template: dict[str, Any], state: dict[str, Any], **options: Any) -> Run:
        return run(template, state, handlers, fake_bin, tmp_path_factory.mktemp("run"), **options)
    return simulate


def run(template: dict[str, Any], state: dict[str, Any], handlers: dict[str, Callable[..., object]], fake_bin: Path,
        folder: Path, *, between: Callable[[dict[str, Any]], None] | None = None, adversarial: bool = False) -> Run:
    """Deploy ``template`` onto a cluster in ``state``, let ``between`` act on it, then destroy the stack.

    The order CloudFormation may choose is fortunate for the access entry unless ``adversarial``: the other
    tests then show what goes wrong even when that race is won.
    """
    state_file = folder / "cluster.json"
    with on_path(fake_bin, state_file):
        cluster = fake_eks.FakeCluster(state_file, handlers, state)
        deployment = fake_eks.Deployment(template=template, cluster=cluster, adversarial=adversarial)
        deployed = deployment.create()
        after_deploy = cluster.state
        if between is not None:
            changed = cluster.state
            between(changed)
            state_file.write_text(fake_eks.json.dumps(changed))
        deployment.delete()
        return Run(deployment, cluster, deployed, after_deploy, cluster.state)


def their_things(state: dict[str, Any]) -> dict[str, Any]:
    return {part: {k: v for k, v in state[part].items() if v.get("owner") == "theirs"}
            for part in ("objects", "releases", "software")}


def our_things(state: dict[str, Any]) -> dict[str, Any]:
    return {"objects": sorted(k for k, v in state["objects"].items() if v["owner"] == "ours"),
            "releases": sorted(k for k, v in state["releases"].items() if v["owner"] == "ours"),
            "addons": sorted(state["addons"])}


@pytest.fixture(scope="module")
def tenant_run(shared_stack: Any, simulate: Simulate) -> Run:
    return simulate(shared_stack.template, tenant_state())


@pytest.mark.parametrize("template", ["shared", "existing-cluster"])
def test_every_kubectl_and_helm_call_is_authorized_in_any_order(
        template: str, shared_stack: Any, existing_cluster_app: Any, simulate: Simulate) -> None:
    """U1: every manifest and chart waits for the provider's access entry, and goes before it, whatever order
    CloudFormation picks among what the template leaves unordered."""
    synthesized = shared_stack if template == "shared" else existing_cluster_app
    result = simulate(synthesized.template, tenant_state(), adversarial=True)
    assert result.deployed, result.deployment.failure
    assert [c for c in result.final["calls"] if c["output"] == fake_eks.UNAUTHORIZED] == []
    assert [c for c in result.final["calls"] if c["tool"] == "helm" and c["args"][0] == "uninstall"]
    assert our_things(result.final) == {"objects": [], "releases": [], "addons": []}


def test_the_other_teams_things_are_exactly_as_they_were(tenant_run: Run) -> None:
    """U3 (their namespace and what is in it), U4 (their HyperPod releases), their benchmark ServiceAccount."""
    before = their_things(tenant_run.cluster.initial)
    assert their_things(tenant_run.after_deploy) == before
    assert their_things(tenant_run.final) == before


def test_what_the_stack_made_is_gone(tenant_run: Run) -> None:
    made = our_things(tenant_run.after_deploy)
    assert f"Namespace//{OUR_NAMESPACE}" in made["objects"]
    assert len(made["releases"]) == 1 and made["addons"]
    assert our_things(tenant_run.final) == {"objects": [], "releases": [], "addons": []}


def test_a_namespace_that_exists_is_neither_applied_nor_deleted(tenant_run: Run) -> None:
    touched = {key for c in tenant_run.final["calls"] for key in c["objects"]}
    assert f"Namespace//{OUR_NAMESPACE}" in touched
    assert f"Namespace//{THEIR_NAMESPACE}" not in touched
    assert f"Namespace//{THEIR_NAMESPACE}" in tenant_run.final["objects"]


def test_add_ons_installed_onto_a_shared_cluster_stay_for_those_who_began_to_use_them(
        shared_stack: Any, simulate: Simulate) -> None:
    """U2: after the deploy the other team issues a certificate with our cert-manager; destroy keeps it."""
    certificate = {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
                   "metadata": {"name": "their-cert", "namespace": THEIR_NAMESPACE}}

    def issue(state: dict[str, Any]) -> None:
        state["objects"][fake_eks.object_key(certificate)] = theirs(certificate)

    result = simulate(shared_stack.template, tenant_state(), between=issue)
    assert result.deployed, result.deployment.failure
    assert fake_eks.object_key(certificate) in result.final["objects"]
    assert fake_eks.CERT_MANAGER in result.final["software"]
    assert result.final["addons"] == {}


def test_a_self_managed_add_on_is_not_adopted(shared_stack: Any, simulate: Simulate) -> None:
    """U2: a metrics-server installed with Helm fails the deploy (no OVERWRITE), and stays as it was."""
    state = tenant_state()
    state["software"]["metrics-server"] = {"owner": "theirs", "by": "helm"}
    result = simulate(shared_stack.template, copy.deepcopy(state))
    assert not result.deployed
    assert "metrics-server" in str(result.deployment.failure)
    assert their_things(result.final) == their_things(state)
    assert our_things(result.final) == {"objects": [], "releases": [], "addons": []}


def test_an_undeclared_namespace_that_exists_fails_the_deploy_and_survives(
        shared_stack: Any, simulate: Simulate) -> None:
    """U3: ``kubectl create`` refuses a namespace that exists: the deploy fails, nothing is adopted or deleted."""
    state = tenant_state()
    clash = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OUR_NAMESPACE}}
    state["objects"][fake_eks.object_key(clash)] = theirs(clash)
    result = simulate(shared_stack.template, copy.deepcopy(state))
    assert not result.deployed
    assert "AlreadyExists" in str(result.deployment.failure)
    assert their_things(result.final) == their_things(state)
    assert our_things(result.final) == {"objects": [], "releases": [], "addons": []}


@pytest.mark.parametrize("stack_name", ["OnSharedCluster", "a", "Platform-Team-A-Inference-" * 5, "x--Y_z"])
def test_per_stack_names_are_helm_release_names_and_distinct(stack_name: str) -> None:
    """A Helm release name is a DNS-1123 label of at most 53 characters; two stacks never share one."""
    for name in ("hyperpod-dependencies", "aws-efa-k8s-device-plugin", "hyperpod-dpd-bench"):
        release = per_stack_name(name, stack_name)
        assert len(release) <= MAX_RELEASE_NAME and DNS_LABEL.fullmatch(release), release
        assert release.startswith(name)
        assert release != per_stack_name(name, stack_name + "2")
