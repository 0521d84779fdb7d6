"""AWS sessions and clients, and botocore errors turned into one clear line.

:class:`AwsClients` is the seam the tests use: it hands out boto3 clients for one account and region,
and tests build it from moto-backed or Stubber-wrapped clients instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    CredentialRetrievalError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    SSOError,
    TokenRetrievalError,
)

from hyperpod_dpd.contracts.aws_names import REGION_NAME
from hyperpod_dpd.contracts.stack_outputs import (
    DeployedSource,
    DeployedStack,
    from_outputs,
    output_error,
    read_outputs_file,
)
from hyperpod_dpd.errors import DpdError, Problem, SpecError, UsageError, problems_error

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_service_quotas import ServiceQuotasClient
    from mypy_boto3_sts import STSClient

AWS_ERRORS: tuple[type[Exception], ...] = (BotoCoreError, ClientError)

NO_CREDENTIALS = ("no AWS credentials found: set AWS_PROFILE or pass --profile, run `aws configure` "
                  "or `aws sso login`")
EXPIRED = "the AWS credentials have expired: refresh them (for example `aws sso login`) and retry"

_EXPIRED_CODES = frozenset({"ExpiredToken", "ExpiredTokenException", "RequestExpired",
                            "TokenRefreshRequired"})
_INVALID_CODES = frozenset({"InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch",
                            "AuthFailure", "InvalidAccessKeyId", "InvalidToken"})
_DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "Forbidden",
                           "403", "AllAccessDisabled", "AccountProblem"})
# S3 error codes that mean "it is not there"; "you may not read this" is classified by is_access_denied.
_MISSING = frozenset({"NoSuchKey", "404", "NotFound", "NoSuchBucket"})
ARCHITECTURE_FIELD = "model.architecture"  # the spec field a model's config.json stands for


class AwsUnavailable(DpdError):
    """No check can reach AWS (no credentials, expired or unknown ones, no region): a usage error."""


def error_code(err: Exception) -> str:
    if isinstance(err, ClientError):
        return str(err.response.get("Error", {}).get("Code", ""))
    return ""


def is_credentials_problem(err: Exception) -> bool:
    """True when the credentials themselves are missing or unusable, as opposed to one call denied."""
    if isinstance(err, NoCredentialsError | PartialCredentialsError | TokenRetrievalError | SSOError
                  | CredentialRetrievalError):
        return True
    return error_code(err) in _EXPIRED_CODES | _INVALID_CODES


def is_access_denied(err: Exception) -> bool:
    return error_code(err) in _DENIED_CODES


def describe_error(err: Exception, *, permission: str | None = None) -> str:
    """One line saying what went wrong and what to do; never a traceback."""
    code = error_code(err)
    if isinstance(err, NoCredentialsError | PartialCredentialsError):
        return NO_CREDENTIALS
    if isinstance(err, TokenRetrievalError | SSOError) or code in _EXPIRED_CODES:
        return EXPIRED
    if isinstance(err, CredentialRetrievalError):
        return f"the AWS credentials could not be loaded: {err}"
    if code in _INVALID_CODES:
        return f"the AWS credentials were rejected ({code}): check the access key, profile and account"
    if code in _DENIED_CODES:
        needed = f"; the caller needs {permission}" if permission else ""
        return f"access denied{_operation(err)}{needed}"
    if isinstance(err, EndpointConnectionError):
        return f"cannot reach AWS: {err}"
    if isinstance(err, ClientError):
        message = err.response.get("Error", {}).get("Message", "")
        return f"{code}{_operation(err)}: {message}" if message else f"{code}{_operation(err)}"
    return f"{type(err).__name__}: {err}"


def _operation(err: Exception) -> str:
    name = getattr(err, "operation_name", None)
    return f" on {name}" if name else ""


ClientFactory = Callable[..., Any]


@dataclass
class AwsClients:
    """boto3 clients for one account and region, created on first use.

    :param factory: ``factory(service_name, region_name=...)`` returning a client; a boto3
        ``Session.client`` in real use, and a dictionary of moto or stubbed clients in tests.
    :param credentials: returns the session's botocore credentials, for requests botocore has no client
        for (AMP's Prometheus query API). :default: None, no such request can be signed
    """

    region: str
    factory: ClientFactory
    profile: str | None = None
    credentials: Callable[[], Any] | None = None
    _cache: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)

    def _client(self, service: str, region: str | None = None) -> Any:
        key = (service, region or self.region)
        if key not in self._cache:
            self._cache[key] = self.factory(service, region_name=key[1])
        return self._cache[key]

    def sts(self) -> STSClient:
        client: STSClient = self._client("sts")
        return client

    def ec2(self) -> EC2Client:
        client: EC2Client = self._client("ec2")
        return client

    def elbv2(self) -> ElasticLoadBalancingv2Client:
        client: ElasticLoadBalancingv2Client = self._client("elbv2")
        return client

    def service_quotas(self) -> ServiceQuotasClient:
        client: ServiceQuotasClient = self._client("service-quotas")
        return client

    def cloudformation(self) -> CloudFormationClient:
        client: CloudFormationClient = self._client("cloudformation")
        return client

    def sagemaker(self) -> SageMakerClient:
        client: SageMakerClient = self._client("sagemaker")
        return client

    def s3(self, region: str | None = None) -> S3Client:
        client: S3Client = self._client("s3", region)
        return client

    def eks(self) -> Any:
        return self._client("eks")

    def amp(self) -> Any:
        return self._client("amp")

    def account(self) -> str:
        """The account of the current credentials; :class:`AwsUnavailable` when there are none usable."""
        try:
            return self.sts().get_caller_identity()["Account"]
        except AWS_ERRORS as err:
            if is_credentials_problem(err):
                raise AwsUnavailable(describe_error(err)) from None
            raise


def check_region(region: str) -> None:
    """:class:`AwsUnavailable` for a region boto3 would refuse halfway through a command (``InvalidRegionError``).

    The name may come from ``--region``, AWS_DEFAULT_REGION (botocore 1.44 configprovider.py) or the profile,
    so the message names all three.
    """
    if not REGION_NAME.match(region):
        raise AwsUnavailable(f"{region!r} is not an AWS region name (from --region, AWS_DEFAULT_REGION or the "
                             "profile): give e.g. us-west-2")


def session_clients(region: str | None, profile: str | None, *,
                    fallback_region: str | None = None) -> AwsClients:
    """Clients from the default credential chain (or ``profile``); :class:`AwsUnavailable` on a bad setup."""
    import boto3  # noqa: PLC0415 - keeps `hyperpod-dpd --help` fast

    try:
        session = boto3.Session(profile_name=profile, region_name=region)
    except ProfileNotFound as err:
        raise AwsUnavailable(f"{err}: check --profile / AWS_PROFILE against ~/.aws/config") from None
    chosen = region or session.region_name or fallback_region
    if not chosen:
        raise AwsUnavailable("no AWS region: pass --region or set AWS_REGION (or a region in the profile)")
    check_region(chosen)
    try:
        return AwsClients(region=chosen, factory=session.client, profile=profile,
                          credentials=session.get_credentials)
    except NoRegionError as err:  # pragma: no cover - region is always set above
        raise AwsUnavailable(str(err)) from None


def describe_stack(clients: AwsClients, stack: str) -> DeployedStack:
    """The stack's outputs from CloudFormation ``DescribeStacks``."""
    try:
        (found,) = clients.cloudformation().describe_stacks(StackName=stack)["Stacks"]
    except AWS_ERRORS as err:
        if error_code(err) == "ValidationError":
            raise output_error("--stack", stack, f"does not exist in {clients.region}",
                       "check the name (`cdk list`) and --region") from None
        raise output_error("--stack", stack, describe_error(err, permission="cloudformation:DescribeStacks"),
                   "fix the credentials or permissions, or pass --outputs-file") from None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in found.get("Outputs", [])
               if "OutputKey" in o and "OutputValue" in o}
    return from_outputs(stack, outputs, source=f"stack {stack} in {clients.region}", option="--stack")


def read_stack(source: DeployedSource, clients: Callable[..., AwsClients]) -> DeployedStack | None:
    """The stack ``source`` names (its outputs file, else ``DescribeStacks``), or ``None`` when it names none.

    A file or stack that cannot be read is a :class:`UsageError` naming the option to fix.
    :param clients: ``clients(region, profile)``, the commands' AWS seam (only called for a stack without a file).
    """
    try:
        if source.outputs_file:
            return read_outputs_file(source.outputs_file, stack=source.stack)
        if source.stack:
            return describe_stack(clients(source.region, source.profile), source.stack)
    except SpecError as err:
        raise problems_error("cannot read the deployed stack:", err) from None
    except AwsUnavailable as err:
        raise UsageError(f"--stack {source.stack}: {err}") from None
    return None


def read_model_config(bucket: str, key: str, *, s3_client: S3Client | None = None) -> bytes:
    """The bytes of ``s3://bucket/key``, a model's ``config.json``, read with ``s3_client`` or a default boto3 client.

    The planner's S3 reader (``load_architecture(..., read_s3=...)``). Missing objects, denied access and missing
    credentials raise :class:`SpecError` on ``model.architecture``, saying what was read and what to do.
    """
    where = f"s3://{bucket}/{key}"
    try:
        if s3_client is None:
            import boto3  # noqa: PLC0415 - keeps `hyperpod-dpd --help` fast

            s3_client = boto3.client("s3")
        response = s3_client.get_object(Bucket=bucket, Key=key)
        body: bytes = response["Body"].read()
    except ClientError as err:
        error = err.response.get("Error", {})
        code = str(error.get("Code", ""))
        detail = error.get("Message") or code
        if is_access_denied(err) or is_credentials_problem(err):
            raise _unreadable(where, f"cannot be read: access denied ({detail})",
                              f"grant s3:GetObject on arn:aws:s3:::{bucket}/{key} to the credentials in use, "
                              "or copy config.json locally and pass its path") from None
        if code in _MISSING:
            what = "the bucket does not exist" if code == "NoSuchBucket" else "the object does not exist"
            raise _unreadable(where, f"cannot be read: {what} ({detail})",
                              "point at the prefix that holds the weights and their config.json") from None
        raise _unreadable(where, f"cannot be read: {code or 'S3 error'} ({detail})",
                          "check the URI, the region and your credentials") from None
    except NoCredentialsError:
        raise _unreadable(where, "cannot be read: no AWS credentials were found",
                          "configure credentials (AWS_PROFILE, environment or instance role), or copy config.json "
                          "locally and pass its path") from None
    except BotoCoreError as err:
        raise _unreadable(where, f"cannot be read: {err}",
                          "check the network, the region and your credentials") from None
    return body


def _unreadable(where: str, message: str, fix: str) -> SpecError:
    return SpecError([Problem(field=ARCHITECTURE_FIELD, value=where, message=message, fix=fix)])
