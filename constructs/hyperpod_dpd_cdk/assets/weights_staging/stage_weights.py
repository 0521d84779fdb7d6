"""Copy one pinned Hugging Face model revision into S3, then signal the CloudFormation wait condition.

Runs in the stack's staging Job (one pod, ``backoffLimit: 0``). Every file is streamed from the Hub
straight into S3 (no scratch disk), its SHA-256 computed on the way and compared with the Hub's where
the Hub gives one (LFS files). A rerun skips files already in S3 with the right size (and checksum);
the last object written is the marker ``<prefix>/.hyperpod-dpd-complete`` holding the revision, so a
redeploy of a staged revision does nothing. Success or failure (with the last log lines) is signalled
to the wait handle, and a watchdog signals failure before the wait condition's own timeout.

The Hub is read through its REST API (``/api/models/<id>/revision/<sha>?blobs=true`` for the file list,
``/<id>/resolve/<sha>/<file>`` for the bytes), so only boto3 is installed, from ``REQUIREMENTS`` (every
wheel pinned with its hash, ``pip install --require-hashes``). The Hugging Face token is read from
Secrets Manager with the pod's IAM role and kept in memory; it never enters an environment variable or
a file. The wait handle's presigned URL is read from ``WAIT_HANDLE_URL_FILE`` (a Kubernetes Secret the
Job mounts), not from the Job's spec. Configuration, all from the environment: ``MODEL_ID``,
``REVISION``, ``BUCKET``, ``PREFIX``, ``TOKEN_SECRET_ARN`` (optional), ``WAIT_HANDLE_URL_FILE`` (or
``WAIT_HANDLE_URL``), ``DEADLINE_SECONDS``, ``EXCLUDE`` (comma-separated globs), ``HF_ENDPOINT``
(default https://huggingface.co), ``REQUIREMENTS``.
"""

from __future__ import annotations

import collections
import fnmatch
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MARKER = ".hyperpod-dpd-complete"
SECRET_POLL_SECONDS = 30
CHUNK = 8 * 1024 * 1024
LAST_LINES: collections.deque[str] = collections.deque(maxlen=15)
MAX_REASON = 3500


class StagingError(Exception):
    """A failure with a message that says what to do."""


def log(message: str) -> None:
    line = f"{time.strftime('%H:%M:%S')} {message}"
    LAST_LINES.append(line)
    print(line, flush=True)


def signal(url: str | None, *, success: bool, reason: str, unique_id: str) -> None:
    """PUT the wait condition's JSON body to its presigned handle URL (empty Content-Type, as signed)."""
    if not url:
        log("no wait handle URL: not signalling")
        return
    body = json.dumps({"Status": "SUCCESS" if success else "FAILURE", "Reason": reason[-MAX_REASON:],
                       "UniqueId": unique_id, "Data": reason[-MAX_REASON:] if success else ""}).encode()
    request = urllib.request.Request(url, data=body, method="PUT", headers={"Content-Type": ""})
    for attempt in range(5):
        try:
            with urllib.request.urlopen(request, timeout=30):
                return
        except OSError as error:
            print(f"signal attempt {attempt + 1} failed: {error}", flush=True)
            time.sleep(2 ** attempt)


# Hosts that are the Hub itself: the token is kept on a redirect to one (huggingface_hub's HF_URL_HOSTS).
HUB_HOSTS = frozenset({"huggingface.co", "hf.co"})


def same_or_hub_host(url: str, target: str) -> bool:
    """Whether a redirect from ``url`` to ``target`` stays on the Hub (huggingface_hub 1.33
    ``utils/_http.py`` ``_is_same_or_hub_host``: same hostname, or a known Hub host)."""
    host = (urllib.parse.urlsplit(target).hostname or "").lower()
    return host == (urllib.parse.urlsplit(url).hostname or "").lower() or host in HUB_HOSTS


class HubRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but drop the token when one leaves the Hub.

    ``resolve/<sha>/<file>`` answers with a redirect to a signed URL on the download CDN
    (``cdn-lfs*.hf.co``, ``cas-bridge.xethub.hf.co``); urllib would copy ``Authorization`` to it.
    huggingface_hub removes it there ("Otherwise it's a signed CDN url => don't send auth",
    ``file_download.py``), and so does this; a same-host redirect (a renamed repository) keeps it.
    """

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,  # noqa: PLR0917
                         newurl: str) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and not same_or_hub_host(req.full_url, newurl):
            for name in [h for h in new.headers if h.lower() == "authorization"]:
                del new.headers[name]
            for name in [h for h in new.unredirected_hdrs if h.lower() == "authorization"]:
                del new.unredirected_hdrs[name]
        return new


OPENER = urllib.request.build_opener(HubRedirects)


@dataclass(frozen=True)
class HubFile:
    name: str
    size: int
    sha256: str | None  # LFS files only


class Hub:
    """The few Hub REST calls staging needs, with clear errors for gated, missing and wrong revisions."""

    def __init__(self, endpoint: str, model_id: str, revision: str, token: str | None) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.model_id = model_id
        self.revision = revision
        self.token = token

    def _open(self, url: str) -> Any:
        headers = {"User-Agent": "hyperpod-dpd-weights-staging"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            return OPENER.open(urllib.request.Request(url, headers=headers), timeout=60)
        except urllib.error.HTTPError as error:
            code = error.headers.get("X-Error-Code", "")
            page = f"https://huggingface.co/{self.model_id}"
            if code == "GatedRepo" or (error.code in (401, 403) and code != "RepoNotFound"):
                state = "has no access" if self.token else "is empty"
                raise GatedError(f"{self.model_id} is gated and the token {state} (HTTP {error.code}): "
                                 f"accept the license at {page} with the "
                                 "account of the token, then store a read token in the secret") from None
            if code == "RevisionNotFound" or (error.code == 404 and "/revision/" in url and code != "RepoNotFound"):
                raise StagingError(f"revision {self.revision} does not exist in {self.model_id}: copy the full "
                                   f"commit SHA from {page}/commits/main") from None
            if error.code in (401, 404):
                raise StagingError(f"model {self.model_id} not found (HTTP {error.code}, {code or 'no code'}): check "
                                   "model_id, or the token's access if the repository is private") from None
            raise

    def files(self) -> list[HubFile]:
        quoted = urllib.parse.quote(self.revision, safe="")
        with self._open(f"{self.endpoint}/api/models/{self.model_id}/revision/{quoted}?blobs=true") as response:
            info = json.load(response)
        return [HubFile(name=s["rfilename"], size=int(s.get("size") or s.get("lfs", {}).get("size") or 0),
                        sha256=(s.get("lfs") or {}).get("sha256")) for s in info.get("siblings", [])]

    def open(self, name: str) -> Any:
        path = urllib.parse.quote(name)
        return self._open(f"{self.endpoint}/{self.model_id}/resolve/{self.revision}/{path}")


class GatedError(StagingError):
    pass


class HashingReader:
    """A file-like wrapper that hashes and counts what boto3 reads from the Hub's response."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.digest = hashlib.sha256()
        self.size = 0

    def read(self, n: int = -1) -> bytes:
        data: bytes = self.raw.read(CHUNK if n is None or n < 0 else n)
        self.digest.update(data)
        self.size += len(data)
        return data


def wanted(files: list[HubFile], exclude: list[str]) -> list[HubFile]:
    return [f for f in files if not any(fnmatch.fnmatch(f.name, pattern) for pattern in exclude)
            and f.name != ".gitattributes"]


ABSENT = ("404", "NoSuchKey", "NotFound")
DENIED = ("403", "AccessDenied")


def error_code(error: BaseException) -> str:
    return str(getattr(error, "response", {}).get("Error", {}).get("Code", ""))


def absent(s3: Any, bucket: str, key: str, error: BaseException) -> bool:
    """Whether a failed GetObject/HeadObject of ``key`` means the key does not exist.

    S3 answers 404 for a missing key only to a caller allowed ``s3:ListBucket`` on the bucket, and
    403 otherwise (S3 API reference, GetObject and HeadObject, "Permissions"). The staging role may
    list only under its prefix, so a 403 is checked against a listing of exactly that key, which its
    ``s3:prefix`` condition allows: the key absent from the listing means "not there yet".
    """
    code = error_code(error)
    if code in ABSENT:
        return True
    if code not in DENIED:
        return False
    try:
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1).get("Contents", [])
    except Exception as listing:  # botocore ClientError
        raise StagingError(f"cannot read s3://{bucket}/{key} ({code}) nor list it ({error_code(listing) or listing}): "
                           "the staging role needs s3:GetObject and s3:ListBucket under its prefix") from None
    if any(o.get("Key") == key for o in listed):
        raise StagingError(f"s3://{bucket}/{key} exists but the staging role may not read it ({code}): check the "
                           "bucket policy and the key's KMS key policy") from None
    return True


def already_there(s3: Any, bucket: str, key: str, file: HubFile) -> bool:
    try:
        head = s3.head_object(Bucket=bucket, Key=key)
    except Exception as error:  # botocore ClientError; a missing key is 404, or 403 to a prefix-scoped role
        if absent(s3, bucket, key, error):
            return False
        raise
    if head["ContentLength"] != file.size:
        return False
    return file.sha256 is None or head.get("Metadata", {}).get("sha256") == file.sha256


def stage(hub: Hub, s3: Any, *, bucket: str, prefix: str, exclude: list[str]) -> int:
    """Copy every wanted file not yet in S3; returns how many were copied. Raises StagingError."""
    marker = f"{prefix}/{MARKER}"
    try:
        done = s3.get_object(Bucket=bucket, Key=marker)["Body"].read().decode().strip()
    except Exception as error:
        if not absent(s3, bucket, marker, error):
            raise StagingError(f"cannot read s3://{bucket}/{marker}: {error}") from None
        done = ""
    if done == hub.revision:
        log(f"s3://{bucket}/{prefix}/ already holds {hub.model_id}@{hub.revision}")
        return 0
    files = wanted(hub.files(), exclude)
    if not any(f.name == "config.json" for f in files):
        raise StagingError(f"{hub.model_id}@{hub.revision} has no config.json: not a model vLLM can load")
    total = sum(f.size for f in files)
    log(f"{len(files)} files, {total / 1e9:.1f} GB, to s3://{bucket}/{prefix}/")
    copied = 0
    for index, file in enumerate(sorted(files, key=lambda f: f.name), 1):
        key = f"{prefix}/{file.name}"
        if already_there(s3, bucket, key, file):
            log(f"[{index}/{len(files)}] {file.name}: already in S3, skipped")
            continue
        started = time.monotonic()
        with hub.open(file.name) as response:
            reader = HashingReader(response)
            metadata = {"sha256": file.sha256} if file.sha256 else {}
            s3.upload_fileobj(reader, bucket, key, ExtraArgs={"Metadata": metadata} if metadata else None)
        sha = reader.digest.hexdigest()
        if reader.size != file.size or (file.sha256 is not None and sha != file.sha256):
            s3.delete_object(Bucket=bucket, Key=key)
            raise StagingError(f"{file.name}: got {reader.size} bytes with sha256 {sha}, the Hub lists {file.size} "
                               f"bytes{f' with sha256 {file.sha256}' if file.sha256 else ''}; deleted, rerun to retry")
        copied += 1
        seconds = max(time.monotonic() - started, 1e-3)
        log(f"[{index}/{len(files)}] {file.name}: {file.size / 1e9:.2f} GB in {seconds:.0f}s")
    s3.put_object(Bucket=bucket, Key=marker, Body=hub.revision.encode())
    log(f"staged {hub.model_id}@{hub.revision}: {copied} files copied")
    return copied


def read_token(secrets: Any, arn: str | None) -> str:
    """The secret as a plain token, or the ``token`` key of a JSON secret; empty when unset."""
    if not arn:
        return ""
    value = secrets.get_secret_value(SecretId=arn).get("SecretString") or ""
    try:
        parsed = json.loads(value)
    except ValueError:
        return value.strip()
    return str(parsed.get("token", "")).strip() if isinstance(parsed, dict) else value.strip()


def token_when_filled(secrets: Any, arn: str, deadline: float, *, clock: Callable[[], float] = time.monotonic,
                      sleep: Callable[[float], None] = time.sleep) -> str:
    """An empty created secret: wait for the user to fill it (the deploy is still running)."""
    while clock() < deadline:
        token = read_token(secrets, arn)
        if token:
            return token
        log(f"the model is gated and the token secret is empty; fill it: aws secretsmanager put-secret-value "
            f"--secret-id {arn} --secret-string '{{\"token\":\"hf_...\"}}'")
        sleep(SECRET_POLL_SECONDS)
    raise GatedError(f"the token secret {arn} stayed empty")


def run(env: dict[str, str], *, s3: Any, secrets: Any, clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep) -> None:
    """Stage, or raise StagingError. The token is only ever a local variable."""
    deadline = clock() + float(env.get("DEADLINE_SECONDS", "21000"))
    arn = env.get("TOKEN_SECRET_ARN") or None
    token = read_token(secrets, arn)
    hub = Hub(env.get("HF_ENDPOINT", "https://huggingface.co"), env["MODEL_ID"], env["REVISION"], token)
    exclude = [p.strip() for p in env.get("EXCLUDE", "").split(",") if p.strip()]
    try:
        stage(hub, s3, bucket=env["BUCKET"], prefix=env["PREFIX"].strip("/"), exclude=exclude)
    except GatedError:
        if token or not arn:
            raise
        hub.token = token_when_filled(secrets, arn, deadline, clock=clock, sleep=sleep)
        stage(hub, s3, bucket=env["BUCKET"], prefix=env["PREFIX"].strip("/"), exclude=exclude)


def _boto3(requirements: str) -> Any:
    try:
        import boto3  # noqa: PLC0415
    except ImportError:
        target = "/tmp/pkgs"
        log(f"installing boto3 from {requirements} (hash-checked)")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-cache-dir", "--require-hashes",
                        "--no-deps", "--only-binary=:all:", "--target", target, "-r", requirements], check=True)
        sys.path.insert(0, target)
        import boto3  # noqa: PLC0415
    return boto3


def handle_url(env: dict[str, str]) -> str | None:
    """The wait handle's URL: from the mounted Secret's file, else the environment (a direct run)."""
    path = env.get("WAIT_HANDLE_URL_FILE")
    if path:
        try:
            with open(path, encoding="utf-8") as file:
                return file.read().strip() or None
        except OSError as error:
            log(f"cannot read the wait handle URL from {path}: {error}")
            return None
    return env.get("WAIT_HANDLE_URL") or None


def main(env: dict[str, str] | None = None) -> int:
    env = dict(os.environ if env is None else env)
    url = handle_url(env)
    unique = f"{env.get('MODEL_ID', '?')}@{env.get('REVISION', '?')}"
    seconds = float(env.get("DEADLINE_SECONDS", "21000"))

    def expired() -> None:
        log(f"staging did not finish within {seconds:.0f}s; a rerun (cdk deploy) skips the files already in S3")
        signal(url, success=False, reason="\n".join(LAST_LINES), unique_id=unique)
        os._exit(3)

    watchdog = threading.Timer(seconds, expired)
    watchdog.daemon = True
    watchdog.start()
    try:
        boto3 = _boto3(env.get("REQUIREMENTS", "/opt/staging/requirements.txt"))
        run(env, s3=boto3.client("s3"), secrets=boto3.client("secretsmanager"))
    except Exception as error:  # every failure, expected (StagingError) or not, must reach CloudFormation
        log(f"FAILED: {error}")
        signal(url, success=False, reason="\n".join(LAST_LINES), unique_id=unique)
        return 1
    finally:
        watchdog.cancel()
    signal(url, success=True, reason=f"staged {unique}", unique_id=unique)
    return 0


if __name__ == "__main__":
    sys.exit(main())
