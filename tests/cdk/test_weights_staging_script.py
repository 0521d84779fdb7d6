"""The staging script (assets/weights_staging/stage_weights.py) run for real against a fake Hugging Face
Hub (a local HTTP server answering the two REST calls the script makes, with the headers the Hub sends
for gated repositories and unknown revisions) and moto's S3 and Secrets Manager."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from support import FakeClock, load_module

from hyperpod_dpd_cdk.weights_staging import SCRIPT

script = load_module("stage_weights", SCRIPT)
MODEL = "meta-llama/Tiny"
REVISION = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "hf_secret_value_never_logged"
BUCKET = "weights"
PREFIX = "huggingface/meta-llama/Tiny/0123456789abcdef0123456789abcdef01234567"
FILES = {"config.json": b'{"architectures": ["LlamaForCausalLM"]}',
         "model-00001-of-00001.safetensors": b"\x01" * 300_000,
         "original/consolidated.00.pth": b"\x02" * 1000}
LFS = {"model-00001-of-00001.safetensors", "original/consolidated.00.pth"}


class FakeCdn:
    """The download CDN the Hub redirects file reads to: another host, serving signed URLs."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.authorization: list[str | None] = []
        cdn = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                cdn.authorization.append(self.headers.get("Authorization"))
                body = cdn.files[urllib.parse.unquote(self.path.split("?")[0].lstrip("/"))]
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        # Another loopback address: another hostname, as cdn-lfs.hf.co is to huggingface.co.
        self.server = ThreadingHTTPServer(("127.0.0.2", 0), Handler)
        self.url = f"http://127.0.0.2:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class FakeHub:
    def __init__(self, *, gated: bool = False, files: dict[str, bytes] | None = None,
                 cdn: FakeCdn | None = None) -> None:
        self.gated = gated
        self.files = dict(FILES if files is None else files)
        self.downloads: list[str] = []
        self.cdn = cdn
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if hub.gated and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self.fail(401 if not self.headers.get("Authorization") else 403, "GatedRepo")
                info = f"/api/models/{MODEL}/revision/"
                if self.path.startswith(info):
                    if not self.path[len(info):].startswith(REVISION):
                        return self.fail(404, "RevisionNotFound")
                    siblings = [{"rfilename": n, "size": len(b),
                                 **({"lfs": {"sha256": hashlib.sha256(b).hexdigest(), "size": len(b)}}
                                    if n in LFS else {})} for n, b in hub.files.items()]
                    return self.send(json.dumps({"id": MODEL, "sha": REVISION, "siblings": siblings}).encode())
                resolve = f"/{MODEL}/resolve/{REVISION}/"
                if self.path.startswith(resolve):
                    name = self.path[len(resolve):]
                    hub.downloads.append(name)
                    if hub.cdn is not None and name.endswith(".safetensors"):  # LFS files live on the CDN
                        self.send_response(302)
                        self.send_header("Location", f"{hub.cdn.url}/{name}?X-Amz-Signature=signed")
                        self.send_header("Content-Length", "0")
                        return self.end_headers()
                    return self.send(hub.served(name))
                return self.fail(404, "RepoNotFound")

            def send(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def fail(self, status: int, code: str) -> None:
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def served(self, name: str) -> bytes:
        return self.files[name]


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for key, value in (("AWS_DEFAULT_REGION", "us-west-2"), ("AWS_ACCESS_KEY_ID", "x"), ("AWS_SECRET_ACCESS_KEY", "x")):
        monkeypatch.setenv(key, value)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-west-2")
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        secrets = boto3.client("secretsmanager", region_name="us-west-2")
        arn = secrets.create_secret(Name="hf", SecretString=json.dumps({"token": TOKEN}))["ARN"]
        empty = secrets.create_secret(Name="hf-empty", SecretString=json.dumps({"token": ""}))["ARN"]
        yield {"s3": s3, "secrets": secrets, "arn": arn, "empty": empty}


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    fake = FakeHub()
    yield fake
    fake.server.shutdown()


def env(hub: FakeHub, **extra: str) -> dict[str, str]:
    return {"MODEL_ID": MODEL, "REVISION": REVISION, "BUCKET": BUCKET, "PREFIX": PREFIX, "HF_ENDPOINT": hub.url,
            "EXCLUDE": "original/*", "DEADLINE_SECONDS": "600", **extra}


def keys(s3: Any) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []))


def test_stages_every_file_but_the_excluded_and_writes_the_marker_last(aws: dict[str, Any], hub: FakeHub) -> None:
    script.run(env(hub), s3=aws["s3"], secrets=aws["secrets"])
    assert keys(aws["s3"]) == [f"{PREFIX}/{script.MARKER}", f"{PREFIX}/config.json",
                               f"{PREFIX}/model-00001-of-00001.safetensors"]
    body = aws["s3"].get_object(Bucket=BUCKET, Key=f"{PREFIX}/model-00001-of-00001.safetensors")
    assert body["Body"].read() == FILES["model-00001-of-00001.safetensors"]
    assert body["Metadata"]["sha256"] == hashlib.sha256(FILES["model-00001-of-00001.safetensors"]).hexdigest()


def test_a_rerun_after_an_interruption_skips_what_is_there(aws: dict[str, Any], hub: FakeHub) -> None:
    script.run(env(hub), s3=aws["s3"], secrets=aws["secrets"])
    aws["s3"].delete_object(Bucket=BUCKET, Key=f"{PREFIX}/{script.MARKER}")  # as if killed before the end
    aws["s3"].delete_object(Bucket=BUCKET, Key=f"{PREFIX}/config.json")
    hub.downloads.clear()
    script.run(env(hub), s3=aws["s3"], secrets=aws["secrets"])
    assert hub.downloads == ["config.json"]


def test_a_staged_revision_is_not_read_again(aws: dict[str, Any], hub: FakeHub) -> None:
    script.run(env(hub), s3=aws["s3"], secrets=aws["secrets"])
    hub.downloads.clear()
    script.run(env(hub), s3=aws["s3"], secrets=aws["secrets"])
    assert hub.downloads == []


def test_a_file_with_the_wrong_checksum_in_s3_is_copied_again(aws: dict[str, Any], hub: FakeHub) -> None:
    name = "model-00001-of-00001.safetensors"
    aws["s3"].put_object(Bucket=BUCKET, Key=f"{PREFIX}/{name}", Body=b"\x09" * len(FILES[name]),
                         Metadata={"sha256": "0" * 64})
    script.run(env(hub), s3=aws["s3"], secrets=aws["secrets"])
    assert name in hub.downloads


def test_a_corrupt_download_fails_and_leaves_nothing(aws: dict[str, Any], hub: FakeHub,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub, "served", lambda name: b"\x00" * len(FILES[name]))
    with pytest.raises(script.StagingError, match="sha256"):
        script.run(env(hub), s3=aws["s3"], secrets=aws["secrets"])
    assert f"{PREFIX}/model-00001-of-00001.safetensors" not in keys(aws["s3"])
    assert f"{PREFIX}/{script.MARKER}" not in keys(aws["s3"])


def test_a_wrong_revision_fails_clearly(aws: dict[str, Any], hub: FakeHub) -> None:
    with pytest.raises(script.StagingError, match=f"revision {'f' * 40} does not exist"):
        script.run(env(hub, REVISION="f" * 40), s3=aws["s3"], secrets=aws["secrets"])


def test_a_gated_model_with_the_token_from_secrets_manager(aws: dict[str, Any]) -> None:
    gated = FakeHub(gated=True)
    script.run(env(gated, TOKEN_SECRET_ARN=aws["arn"]), s3=aws["s3"], secrets=aws["secrets"])
    assert f"{PREFIX}/{script.MARKER}" in keys(aws["s3"])


def test_a_gated_model_without_access_fails_naming_the_license_page(aws: dict[str, Any]) -> None:
    gated = FakeHub(gated=True)
    aws["secrets"].put_secret_value(SecretId=aws["arn"], SecretString="hf_other_account")
    with pytest.raises(script.GatedError, match=f"accept the license at https://huggingface.co/{MODEL}"):
        script.run(env(gated, TOKEN_SECRET_ARN=aws["arn"]), s3=aws["s3"], secrets=aws["secrets"])


def test_an_empty_created_secret_is_waited_for_until_filled(aws: dict[str, Any]) -> None:
    gated = FakeHub(gated=True)
    clock = FakeClock()
    polls = []

    def sleep(seconds: float) -> None:
        polls.append(seconds)
        clock.sleep(seconds)
        if len(polls) == 2:  # the user fills it while the deploy waits
            aws["secrets"].put_secret_value(SecretId=aws["empty"], SecretString=json.dumps({"token": TOKEN}))

    script.run(env(gated, TOKEN_SECRET_ARN=aws["empty"]), s3=aws["s3"], secrets=aws["secrets"], clock=clock,
               sleep=sleep)
    assert polls == [script.SECRET_POLL_SECONDS] * 2
    assert f"{PREFIX}/{script.MARKER}" in keys(aws["s3"])


def test_failure_signals_the_wait_condition_with_the_last_lines_and_no_token(
        aws: dict[str, Any], hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    signalled: list[dict[str, Any]] = []
    monkeypatch.setattr(script, "_boto3", lambda version: boto3)
    monkeypatch.setattr(script, "signal", lambda url, **kw: signalled.append(kw))
    code = script.main(env(hub, REVISION="f" * 40, TOKEN_SECRET_ARN=aws["arn"], WAIT_HANDLE_URL="https://h"))
    assert code == 1
    assert signalled[0]["success"] is False
    assert "does not exist" in signalled[0]["reason"]
    assert TOKEN not in signalled[0]["reason"]


def test_success_signals_once(aws: dict[str, Any], hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    signalled: list[dict[str, Any]] = []
    monkeypatch.setattr(script, "_boto3", lambda version: boto3)
    monkeypatch.setattr(script, "signal", lambda url, **kw: signalled.append(kw))
    assert script.main(env(hub, WAIT_HANDLE_URL="https://h")) == 0
    assert [s["success"] for s in signalled] == [True]


def test_the_signal_body_is_what_cloudformation_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[Any] = []

    class Response:
        def __enter__(self) -> Response:
            return self

        def __exit__(self, *args: object) -> None:
            pass

    monkeypatch.setattr(script.urllib.request, "urlopen", lambda request, timeout: sent.append(request) or Response())
    script.signal("https://cloudformation-waitcondition/x", success=False, reason="line\n" * 2000, unique_id="m@r")
    request = sent[0]
    assert request.get_method() == "PUT" and request.get_header("Content-type") == ""
    body = json.loads(request.data)
    assert body["Status"] == "FAILURE" and body["UniqueId"] == "m@r"
    assert len(body["Reason"]) <= script.MAX_REASON


class PrefixScopedS3:
    """moto's S3 as the staging role sees it: without s3:ListBucket on a missing key, S3 answers 403, not
    404 (S3 API reference, GetObject/HeadObject "Permissions": "If you don't have the s3:ListBucket
    permission, Amazon S3 returns an HTTP status code 403 Access Denied error"); listing is allowed only
    under the role's prefix (its ``s3:prefix`` condition). moto evaluates no IAM, so this wrapper does."""

    def __init__(self, s3: Any) -> None:
        self.s3 = s3
        self.listed: list[str] = []

    def _denied(self, operation: str, code: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": "Access Denied"},
                            "ResponseMetadata": {"HTTPStatusCode": 403}}, operation)

    def get_object(self, **kw: Any) -> Any:
        try:
            return self.s3.get_object(**kw)
        except ClientError as error:
            if error.response["Error"]["Code"] == "NoSuchKey":
                raise self._denied("GetObject", "AccessDenied") from None
            raise

    def head_object(self, **kw: Any) -> Any:
        try:
            return self.s3.head_object(**kw)
        except ClientError as error:
            if error.response["Error"]["Code"] == "404":
                raise self._denied("HeadObject", "403") from None  # HEAD has no body: the code is the status
            raise

    def list_objects_v2(self, **kw: Any) -> Any:
        if not str(kw.get("Prefix", "")).startswith(f"{PREFIX}/"):
            raise self._denied("ListObjectsV2", "AccessDenied")
        self.listed.append(kw["Prefix"])
        return self.s3.list_objects_v2(**kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.s3, name)


def test_a_prefix_scoped_role_reads_the_403_of_a_missing_key_as_absent(aws: dict[str, Any], hub: FakeHub) -> None:
    scoped = PrefixScopedS3(aws["s3"])
    script.run(env(hub), s3=scoped, secrets=aws["secrets"])
    assert f"{PREFIX}/{script.MARKER}" in keys(aws["s3"])
    assert f"{PREFIX}/{script.MARKER}" in scoped.listed, "the 403 on the marker was checked by listing that key"
    hub.downloads.clear()
    script.run(env(hub), s3=scoped, secrets=aws["secrets"])  # the marker is there now: nothing is read again
    assert hub.downloads == []


def test_a_403_on_a_key_that_exists_is_a_clear_failure(aws: dict[str, Any], hub: FakeHub) -> None:
    scoped = PrefixScopedS3(aws["s3"])
    aws["s3"].put_object(Bucket=BUCKET, Key=f"{PREFIX}/{script.MARKER}", Body=b"old")
    denied = scoped._denied("GetObject", "AccessDenied")

    def get_object(**kw: Any) -> Any:
        raise denied

    scoped.get_object = get_object  # type: ignore[method-assign]
    with pytest.raises(script.StagingError, match="exists but the staging role may not read it"):
        script.run(env(hub), s3=scoped, secrets=aws["secrets"])


def test_a_403_the_role_cannot_list_either_names_the_permissions(aws: dict[str, Any], hub: FakeHub) -> None:
    scoped = PrefixScopedS3(aws["s3"])
    with pytest.raises(script.StagingError, match="s3:ListBucket under its prefix"):
        script.run(env(hub, PREFIX="elsewhere/model"), s3=scoped, secrets=aws["secrets"])


def test_the_token_is_not_sent_to_the_download_cdn(aws: dict[str, Any]) -> None:
    cdn = FakeCdn(FILES)
    gated = FakeHub(gated=True, cdn=cdn)
    try:
        script.run(env(gated, TOKEN_SECRET_ARN=aws["arn"]), s3=aws["s3"], secrets=aws["secrets"])
    finally:
        gated.server.shutdown()
        cdn.server.shutdown()
    assert cdn.authorization == [None], "the signed CDN URL got the Hub token"
    body = aws["s3"].get_object(Bucket=BUCKET, Key=f"{PREFIX}/model-00001-of-00001.safetensors")["Body"].read()
    assert body == FILES["model-00001-of-00001.safetensors"]


def test_a_redirect_on_the_hub_keeps_the_token() -> None:
    assert script.same_or_hub_host("https://huggingface.co/a/resolve/x/f", "https://huggingface.co/b/resolve/x/f")
    assert script.same_or_hub_host("https://mirror.example/a", "https://hf.co/a")
    assert not script.same_or_hub_host("https://huggingface.co/a", "https://cas-bridge.xethub.hf.co/x?sig=1")
    assert not script.same_or_hub_host("https://huggingface.co/a", "https://cdn-lfs-us-1.hf.co/x?sig=1")


def test_the_wait_handle_url_is_read_from_the_mounted_secret(aws: dict[str, Any], hub: FakeHub, tmp_path: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    urls: list[str | None] = []
    monkeypatch.setattr(script, "_boto3", lambda requirements: boto3)
    monkeypatch.setattr(script, "signal", lambda url, **kw: urls.append(url))
    path = tmp_path / "url"
    path.write_text("https://cloudformation-waitcondition-us-west-2.s3.amazonaws.com/signed\n")
    assert script.main(env(hub, WAIT_HANDLE_URL_FILE=str(path))) == 0
    assert urls == ["https://cloudformation-waitcondition-us-west-2.s3.amazonaws.com/signed"]


def test_boto3_is_installed_only_with_hash_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setitem(sys.modules, "boto3", None)  # as in the stock image: no boto3

    def run(command: list[str], check: bool) -> None:
        calls.append(command)
        monkeypatch.delitem(sys.modules, "boto3")

    monkeypatch.setattr(script.subprocess, "run", run)
    monkeypatch.setattr(script.sys, "path", list(sys.path))
    assert script._boto3("/opt/staging/requirements.txt").__name__ == "boto3"
    (command,) = calls
    assert "--require-hashes" in command and "--no-deps" in command and "--only-binary=:all:" in command
    assert command[-2:] == ["-r", "/opt/staging/requirements.txt"]
    assert not any(arg.startswith("boto3==") for arg in command), "nothing unhashed on the command line"
