"""Stage a pinned Hugging Face revision into the model bucket during ``cdk deploy``, before the endpoint.

Why not the operator's own ``huggingface`` source: it downloads in every pod's init container, so each
prefill and decode pod fetches the whole model (about 140 GB for Llama 3.3 70B) on every start, and its
token must sit in a Kubernetes Secret. The stack instead copies the revision once into
``s3://<model bucket>/huggingface/<model id>/<revision>/`` and points the endpoint at it, as AWS's DPD
example reads S3.

Order: wait handle -> staging Job (ServiceAccount with its own IAM role, script and hash-pinned
requirements in a ConfigMap, the handle's URL in a Secret) -> ``AWS::CloudFormation::WaitCondition`` ->
endpoint manifest. The Job signals the handle (success, or failure with its last log lines); the
condition's ``Timeout`` bounds the wait and the script's watchdog fails before it.

Updates: a wait condition's ``Handle``, ``Count`` and ``Timeout`` cannot be updated ("Updates aren't
supported", AWS::CloudFormation::WaitCondition reference; aws-cloudformation/cloudformation-coverage-roadmap
#1097 gives new logical ids as the way), and a Job's pod template is immutable. So the handle, the wait,
the Job manifest and every Kubernetes name in it carry a digest of the whole rendered Job and the wait's
timeout: any change (``weights_staging_hours``, the image, the script, the pins) makes new ones, which
the script resumes from what S3 holds, and CloudFormation deletes the old ones after. The role is keyed by
model, revision and prefix only, so it stays; its trust (``StringEquals``) names the current Job's
ServiceAccount only and moves to the new name with the change.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path

import cdk8s
from aws_cdk import (
    Annotations,
    Aws,
    CfnOutput,
    CfnWaitCondition,
    CfnWaitConditionHandle,
    Duration,
    RemovalPolicy,
    Stack,
)
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct, IConstruct

from hyperpod_dpd import DpdSpec, HuggingFaceSource, Problem, S3Source
from hyperpod_dpd._kplus import kplus
from hyperpod_dpd.contracts.bench_job import DEFAULT_IMAGE, ROLE_ARN_ANNOTATION, RUN_USER
from hyperpod_dpd.contracts.operator import INSTANCE_GROUP_LABEL, SYSTEM_POOL
from hyperpod_dpd_cdk._late import late_string
from hyperpod_dpd_cdk._private.nag import acknowledge
from hyperpod_dpd_cdk.inference_operator import IrsaTrust
from hyperpod_dpd_cdk.lifecycle import prefix_findings
from hyperpod_dpd_cdk.model_bucket import grant_bucket_key

SCRIPT = Path(__file__).resolve().parent / "assets" / "weights_staging" / "stage_weights.py"
# boto3 and its dependencies, each wheel with its sha256 (scripts/pin_staging_requirements.py writes it).
REQUIREMENTS = SCRIPT.with_name("requirements.txt")
SCRIPT_DIR = "/opt/staging"
HANDLE_DIR = "/var/run/hyperpod-dpd/wait-handle"
HANDLE_KEY = "url"
STAGED_ROOT = "huggingface"
# A WaitCondition may wait at most 12 hours (AWS::CloudFormation::WaitCondition Timeout).
MAX_WAIT = Duration.hours(12)
DEFAULT_WAIT = Duration.hours(4)
# The script's watchdog signals failure this long before the wait condition would time out.
WATCHDOG_MARGIN = Duration.minutes(10)
# The consolidated-checkpoint copy Meta ships beside the safetensors; vLLM reads the safetensors.
DEFAULT_EXCLUDE = ("original/*",)
SERVICE_ACCOUNT = "hyperpod-dpd-weights"
# A node the staging Job may run on without the stack's system pool (an existing cluster): any Linux node
# that is not a HyperPod node (well-known label kubernetes.io/os, Kubernetes "Well-Known Labels").
OS_LABEL = "kubernetes.io/os"
SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:.+-[A-Za-z0-9]{6}$")
MANAGED_BY = {"app.kubernetes.io/managed-by": "hyperpod-dpd", "app.kubernetes.io/name": "hyperpod-dpd-weights"}


def staged_prefix(source: HuggingFaceSource) -> str:
    """Where a revision lands in the model bucket: ``huggingface/<owner>/<name>/<revision>``."""
    return f"{STAGED_ROOT}/{source.model_id}/{source.revision}"


def weights_prefix(spec: DpdSpec) -> str | None:
    """The key prefix the endpoint reads in the stack's bucket: an S3 source's, or a staged revision's."""
    source = spec.model.source
    if isinstance(source, S3Source):
        return source.prefix
    if isinstance(source, HuggingFaceSource):
        return staged_prefix(source)
    return None


def staging_problems(spec: DpdSpec, *, field: str) -> list[Problem]:
    """What a stack cannot stage: an unpinned revision, a token that is not a secret's ARN."""
    source = spec.model.source
    if not isinstance(source, HuggingFaceSource):
        return []
    problems = []
    if source.revision is None:
        problems.append(Problem(field=f"{field}.model.source.huggingface.revision", value=None,
                                message="is required when the stack stages the weights (the staged copy is "
                                        "keyed by it, and an unpinned main branch changes under the endpoint)",
                                fix=f"copy the 40-character commit SHA from https://huggingface.co/"
                                    f"{source.model_id}/commits/main"))
    if source.token_secret_arn is not None and not SECRET_ARN.match(source.token_secret_arn):
        problems.append(Problem(field=f"{field}.model.source.huggingface.token_secret_arn",
                                value=source.token_secret_arn, message="is not the full ARN of a Secrets Manager "
                                "secret", fix="use the ARN from 'aws secretsmanager describe-secret --secret-id NAME "
                                "--query ARN' (it ends in -XXXXXX)"))
    return problems


def staging_wait_problems(wait: Duration) -> list[Problem]:
    if Duration.minutes(15).to_seconds() <= wait.to_seconds() <= MAX_WAIT.to_seconds():
        return []
    return [Problem(field="weights_staging_timeout", value=wait.to_human_string(),
                    message="must be between 15 minutes and 12 hours (a CloudFormation wait condition's limit)",
                    fix="use e.g. 4 hours (-c weights_staging_hours=4)")]


def staging_digest(source: HuggingFaceSource, prefix: str) -> str:
    """What is staged: keys the role and its ServiceAccount, which stay across changes to the Job."""
    return hashlib.sha256(f"{source.model_id}@{source.revision}:{prefix}".encode()).hexdigest()[:10]


def job_digest(identity: str, rendered: object, wait: Duration) -> str:
    """What is waited for: the rendered Job (tokens resolved to CloudFormation) and the wait's timeout."""
    payload = json.dumps({"staged": identity, "job": rendered, "wait": int(wait.to_seconds())}, sort_keys=True,
                         separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:10]


class WeightsStagingChart(cdk8s.Chart):
    """ServiceAccount (IRSA), the script and its pinned requirements as a ConfigMap, the wait handle's URL
    as a Secret, and the Job, on a Linux node that is not a HyperPod node (the system pool when there is
    one)."""

    def __init__(self, scope: Construct, id: str, *, namespace: str, name: str, service_account: str,
                 role_arn: str, environment: dict[str, str], handle_url: str, deadline: Duration) -> None:
        super().__init__(scope, id, disable_resource_name_hashes=True, namespace=namespace)
        self.service_account = kplus.ServiceAccount(
            self, "ServiceAccount", automount_token=False, metadata=cdk8s.ApiObjectMetadata(
                name=service_account, labels=dict(MANAGED_BY), annotations={ROLE_ARN_ANNOTATION: role_arn}))
        script = kplus.ConfigMap(self, "Script", metadata=cdk8s.ApiObjectMetadata(name=name, labels=dict(MANAGED_BY)),
                                 data={SCRIPT.name: SCRIPT.read_text(encoding="utf-8"),
                                       REQUIREMENTS.name: REQUIREMENTS.read_text(encoding="utf-8")})
        # Not in the Job's env: whoever may read Jobs or Pods in the namespace could signal the wait early.
        handle = kplus.Secret(self, "WaitHandle", metadata=cdk8s.ApiObjectMetadata(name=name, labels=dict(MANAGED_BY)),
                              string_data={HANDLE_KEY: handle_url})
        self.job = kplus.Job(
            self, "Job", metadata=cdk8s.ApiObjectMetadata(name=name, labels=dict(MANAGED_BY)),
            pod_metadata=cdk8s.ApiObjectMetadata(labels=dict(MANAGED_BY)), select=False, backoff_limit=0,
            active_deadline=cdk8s.Duration.seconds(int(deadline.to_seconds())),
            ttl_after_finished=cdk8s.Duration.days(1), restart_policy=kplus.RestartPolicy.NEVER,
            service_account=self.service_account, automount_service_account_token=False,
            security_context=kplus.PodSecurityContextProps(ensure_non_root=True, user=RUN_USER, group=RUN_USER,
                                                           fs_group=RUN_USER))
        scripts = kplus.Volume.from_config_map(self, "ScriptVolume", script)
        handle_volume = kplus.Volume.from_secret(self, "WaitHandleVolume", handle, default_mode=0o440)
        tmp = kplus.Volume.from_empty_dir(self, "TmpVolume", "tmp")
        files = {"REQUIREMENTS": f"{SCRIPT_DIR}/{REQUIREMENTS.name}",
                 "WAIT_HANDLE_URL_FILE": f"{HANDLE_DIR}/{HANDLE_KEY}"}
        self.job.add_container(
            name="stage", image=DEFAULT_IMAGE, command=["python", f"{SCRIPT_DIR}/{SCRIPT.name}"],
            env_variables={key: kplus.EnvValue.from_value(value)
                           for key, value in sorted({**environment, **files}.items())},
            image_pull_policy=kplus.ImagePullPolicy.IF_NOT_PRESENT,
            resources=kplus.ContainerResources(
                cpu=kplus.CpuResources(request=kplus.Cpu.millis(1000), limit=kplus.Cpu.millis(2000)),
                memory=kplus.MemoryResources(request=cdk8s.Size.gibibytes(1), limit=cdk8s.Size.gibibytes(2))),
            security_context=kplus.ContainerSecurityContextProps(
                ensure_non_root=True, user=RUN_USER, group=RUN_USER, privileged=False,
                allow_privilege_escalation=False, read_only_root_filesystem=True),
            volume_mounts=[kplus.VolumeMount(path=SCRIPT_DIR, volume=scripts, read_only=True),
                           kplus.VolumeMount(path=HANDLE_DIR, volume=handle_volume, read_only=True),
                           kplus.VolumeMount(path="/tmp", volume=tmp)])
        # Required: a Linux node that is not a HyperPod node, which every cluster that can run the stack has;
        # preferred: the stack's own system pool, which only a cluster the stack creates has. Requiring the
        # pool would leave the pod Pending on an existing cluster until the wait times out.
        self.job.scheduling.attract(kplus.Node.labeled(kplus.NodeLabelQuery.is_(OS_LABEL, "linux"),
                                                       kplus.NodeLabelQuery.does_not_exist(INSTANCE_GROUP_LABEL)))
        self.job.scheduling.attract(kplus.Node.labeled(
            *(kplus.NodeLabelQuery.is_(key, value) for key, value in sorted(SYSTEM_POOL.items()))), weight=100)


class HuggingFaceTokenSecret(Construct):
    """An empty secret for specs that name none, and the command to fill it.

    Its value is ``{"token": ""}`` plus a generated placeholder key: CloudFormation never holds the token,
    the user puts it in with ``put-secret-value`` (before or during the deploy; the Job waits for it). No
    fixed name (a deleted secret's name stays reserved during the recovery window, and a redeploy would
    fail on it); the description starts with the stack name, for ``list-secrets --filters``.
    """

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self.secret = secretsmanager.Secret(
            self, "Resource",
            description=f"{stack.stack_name}: Hugging Face read token for the weights staging Job; put it here, "
                        "the stack never sees it",
            removal_policy=RemovalPolicy.DESTROY, generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template='{"token": ""}', generate_string_key="placeholder", password_length=8,
                exclude_punctuation=True))
        self.secret_arn = self.secret.secret_arn
        acknowledge(self.secret, "SMG4", "A Hugging Face token is issued and revoked on the Hub; Secrets Manager "
                    "cannot rotate it.")
        CfnOutput(self, "FillCommand", description="Store a Hugging Face read token for the weights staging Job: "
                  "needed for gated or private models only (public ones stage without it)",
                  value=f"aws secretsmanager put-secret-value --region {stack.region} --secret-id "
                        f"{self.secret_arn} --secret-string '{{\"token\":\"hf_...\"}}'")


class WeightsStaging(Construct):
    """Copies one endpoint's pinned Hugging Face revision into ``model_bucket`` before the endpoint exists.

    The staging role (IRSA, trusted by one ServiceAccount) may read the token secret and write only under
    the staged prefix. For a gated model whose secret is still empty the Job waits for it to be filled
    (the command is in the stack outputs and in the Job's log) until the wait's limit.

    :param cluster: where the Job runs. :param trust: the cluster's IRSA trust (``InferenceOperator.trust``).
    :param spec: an endpoint with a ``huggingface`` source and a pinned revision.
    :param model_bucket: the stack's weights bucket. :param namespace: where the Job runs.
    :param token_secret_arn: the Secrets Manager secret with the Hub token (the spec's, or
        :class:`HuggingFaceTokenSecret`).
    :param wait: how long ``cdk deploy`` waits for staging. :default: 4 hours (at most 12)
    :param exclude: repository paths not copied. :default: ``original/*``
    :param after: what the Job manifest follows (its namespace). :default: - none
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, trust: IrsaTrust, spec: DpdSpec,
                 model_bucket: s3.IBucket, namespace: str, token_secret_arn: str, wait: Duration = DEFAULT_WAIT,
                 exclude: Sequence[str] = DEFAULT_EXCLUDE, after: Sequence[IConstruct] = ()) -> None:
        super().__init__(scope, id)
        source = spec.model.source
        assert isinstance(source, HuggingFaceSource) and source.revision is not None
        self.prefix = staged_prefix(source)
        identity = staging_digest(source, self.prefix)
        self.service_account_prefix = f"{SERVICE_ACCOUNT}-{identity}-"

        self.secret_arn = token_secret_arn
        # The ServiceAccount is renamed with the Job (its name carries the Job's digest, computed below from a
        # draft that holds this role's ARN); the trust names exactly the current one, filled in at synth.
        subject = late_string(lambda: f"system:serviceaccount:{namespace}:{self.service_account_name}")
        self.role = iam.Role(self, "Role", assumed_by=trust.principal(f"Weights{identity}", subject),
                             description=f"hyperpod-dpd: stage {source.model_id} into {self.prefix}/")
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
            resources=[model_bucket.arn_for_objects(f"{self.prefix}/*")]))
        self.role.add_to_policy(iam.PolicyStatement(
            actions=["s3:ListBucket"], resources=[model_bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{self.prefix}/*"]}}))
        grant_bucket_key(model_bucket, self.role, write=True)
        self.role.add_to_policy(iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"],
                                                    resources=[self.secret_arn]))
        acknowledge(self.role, "IAM5", "The staging Job writes the revision's files, whose names the Hub lists, "
                    "under its own prefix only.", prefix_findings(model_bucket, [self.prefix]))

        environment = {
            "MODEL_ID": source.model_id, "REVISION": source.revision, "BUCKET": model_bucket.bucket_name,
            "PREFIX": self.prefix, "TOKEN_SECRET_ARN": self.secret_arn, "AWS_REGION": Aws.REGION,
            "EXCLUDE": ",".join(exclude),
            "DEADLINE_SECONDS": str(int(wait.to_seconds() - WATCHDOG_MARGIN.to_seconds())),
            "HOME": "/tmp", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}

        def chart(suffix: str, handle_url: str) -> WeightsStagingChart:
            name = f"stage-weights-{spec.name[:38].rstrip('-')}-{suffix}"  # a Job name is at most 63 characters
            return WeightsStagingChart(
                cdk8s.App(), name, namespace=namespace, name=name, service_account=self.service_account_prefix + suffix,
                role_arn=self.role.role_arn, deadline=wait, environment=environment, handle_url=handle_url)

        # The digest of the Job as rendered with placeholders for its own names and the handle it signals.
        digest = job_digest(identity, Stack.of(self).resolve(chart("draft", "<wait handle URL>").to_json()), wait)
        self.digest = digest
        self.handle = CfnWaitConditionHandle(self, f"Handle{digest}")
        self.chart = chart(digest, self.handle.ref)
        self.job_name = self.chart.job.name
        self.service_account_name = self.chart.service_account.name
        self.manifest = cluster.add_cdk8s_chart(f"Job{digest}", self.chart)
        self.manifest.node.add_dependency(self.role.node.find_child("DefaultPolicy"))
        for dependency in after:
            self.manifest.node.add_dependency(dependency)
        self.wait = CfnWaitCondition(self, f"Wait{digest}", handle=self.handle.ref, count=1,
                                     timeout=str(int(wait.to_seconds())))
        # The timer starts when CloudFormation creates the condition: only once the Job is applied.
        self.wait.node.add_dependency(self.manifest)
        if not isinstance(cluster, eks.Cluster):
            Annotations.of(self).add_warning_v2(
                "hyperpod-dpd:StagingNeedsCpuNode",
                f"the weights staging Job {namespace}/{self.job_name} runs on a Linux node of the existing cluster "
                "that is not a HyperPod node, with 1 CPU and 1 GiB free; without one it stays Pending and cdk "
                f"deploy waits {wait.to_human_string()} before it fails")
