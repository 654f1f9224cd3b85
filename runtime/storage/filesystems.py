"""The one file-system layer: every warehouse, table, input and savepoint location is a local
path (the default, ``file://`` too) or an object-store URI (``s3://``, ``gs://``, ``abfs://``),
and everything the runtime reads or writes there goes through ``pyarrow.fs`` via this module.

Credentials and endpoints come from each store's standard environment: for S3
``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_REGION`` and ``AWS_ALLOW_HTTP``. delta-rs reads the same variables itself (object_store's
``from_env``), so Delta tables need no ``storage_options`` and both libraries see one setting.
Its commits on S3 are safe without a lock: delta-rs 1.x writes each log entry with a conditional
put (``If-None-Match: *``), so of two writers of one version exactly one succeeds.
Executors get the variables through the job's deployment (``deployment_env``), never a file.
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import uuid
from urllib.parse import unquote, urlparse

import pyarrow.fs as pafs

# Variables that reach a store: forwarded to executors (spark.executorEnv) and Airflow's tasks.
STORE_ENV_PREFIXES = ("AWS_", "AZURE_", "GOOGLE_")
S3_ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
          "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ALLOW_HTTP")


class StorageException(RuntimeError):
    """A location cannot be reached; says which one and which setting to fix."""


def is_uri(location: str) -> bool:
    """An object-store URI (anything with a scheme but ``file://``)."""
    return "://" in location and not location.startswith("file://")


def file_uri(location: str) -> str:
    """A location as a URI, for readers that take URIs only (Spark, Airflow's assets): a local
    path, relative too, as ``file:///abs/path``; a URI (``file://`` too) as it is."""
    return location if "://" in location else "file://" + os.path.abspath(location)


def absolute(location: str) -> str:
    """A local path made absolute (``file://`` dropped); a URI as it is, without a trailing /."""
    if is_uri(location):
        return location.rstrip("/")
    if location.startswith("file://"):
        location = unquote(location[len("file://"):])
    return os.path.abspath(location)


def join(location: str, *parts: str) -> str:
    return "/".join([location.rstrip("/"), *parts]) if is_uri(location) else os.path.join(location, *parts)


def relative(location: str, root: str) -> str:
    """``location`` relative to ``root`` (both local or both URIs of one store)."""
    if is_uri(location):
        location, root = absolute(location), absolute(root)
        if not location.startswith(root + "/"):
            raise ValueError(f"{location} is not under {root}")
        return location[len(root) + 1:]
    return os.path.relpath(os.path.abspath(location), os.path.abspath(root))


def basename(location: str) -> str:
    return absolute(location).rsplit("/", 1)[-1]


def filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """(pyarrow file system, path inside it) of a local path, ``file://`` URI or store URI."""
    if not is_uri(location):
        return pafs.LocalFileSystem(), absolute(location)
    url = urlparse(location)
    if url.scheme in ("s3", "s3a"):
        return _s3(*(os.environ.get(k) for k in S3_ENV)), (url.netloc + url.path).rstrip("/")
    fs, path = pafs.FileSystem.from_uri(location)
    return fs, path.rstrip("/")


@functools.lru_cache(maxsize=8)
def _s3(endpoint, key, secret, token, region, default_region, allow_http) -> pafs.S3FileSystem:
    """S3 as the environment says (cached per setting). The AWS SDK would read most variables
    itself, but it resolves a missing region with a request per file system and retries an
    unreachable endpoint for minutes: say both here. The scheme follows the endpoint's URL."""
    url = urlparse(endpoint) if endpoint else None
    return pafs.S3FileSystem(
        access_key=key, secret_key=secret, session_token=token,
        region=region or default_region or "us-east-1",
        endpoint_override=url.netloc + url.path.rstrip("/") if url else None,
        scheme=url.scheme if url else "https", connect_timeout=5, request_timeout=30,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=3))


def deployment_env(environ=None) -> dict:
    """The store settings of this process's environment, for executors and deployed tasks."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if k.startswith(STORE_ENV_PREFIXES)}


# ---- files ---------------------------------------------------------------------------------

def info(location: str) -> pafs.FileInfo:
    fs, path = filesystem(location)
    return fs.get_file_info(path)


def exists(location: str) -> bool:
    return info(location).type != pafs.FileType.NotFound


def isdir(location: str) -> bool:
    return info(location).type == pafs.FileType.Directory


def isfile(location: str) -> bool:
    return info(location).type == pafs.FileType.File


def size(location: str) -> int:
    found = info(location)
    if found.type != pafs.FileType.File:
        raise FileNotFoundError(f"{location} is not a file")
    return found.size


def makedirs(location: str) -> None:
    """A folder and its parents (object stores have none: nothing to do there)."""
    if not is_uri(location):
        os.makedirs(absolute(location), exist_ok=True)


def listdir(location: str) -> list[str]:
    """Names directly in a folder, sorted; [] when there is none."""
    fs, path = filesystem(location)
    return sorted(f.base_name for f in fs.get_file_info(pafs.FileSelector(path, allow_not_found=True)))


def walk_files(location: str, skip=(".", "_")) -> list[str]:
    """Every file under a folder in ``os.walk``'s order (a folder's files, sorted, before its
    subfolders), leaving out names and folders starting with ``skip``."""
    fs, path = filesystem(location)
    found = []
    for f in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        parts = f.path[len(path) + 1:].split("/")
        if f.type == pafs.FileType.File and not any(p.startswith(skip) for p in parts):
            found.append(parts)
    found.sort(key=lambda parts: [(1, p) for p in parts[:-1]] + [(0, parts[-1])])
    return [join(location.rstrip("/") if is_uri(location) else location, *parts) for parts in found]


def read_bytes(location: str, start: int = 0, length: int = None) -> bytes:
    fs, path = filesystem(location)
    with fs.open_input_file(path) as f:
        return f.read_at(f.size() - start if length is None else length, start)


def write_bytes(location: str, data: bytes) -> None:
    """Write a whole file, never seen half-written (``file_writer``)."""
    with file_writer(location) as f:
        f.write(data)


@contextlib.contextmanager
def file_writer(location: str):
    """A file written as a stream (its bytes as they come, never all held at once), never seen
    half-written: a local file is written beside its place and renamed into it when done; an
    object appears when its upload completes, and is deleted when its writer failed."""
    fs, path = filesystem(location)
    if is_uri(location):
        try:
            with fs.open_output_stream(path) as f:
                yield f
        except BaseException:
            remove(location)
            raise
        return
    makedirs(os.path.dirname(path))
    tmp = f"{path}.inprogress.{uuid.uuid4().hex}"
    try:
        with open(tmp, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def copy_file(source: str, target: str) -> None:
    src_fs, src = filesystem(source)
    dst_fs, dst = filesystem(target)
    makedirs(os.path.dirname(target))       # the target's, not dst: a store's path has no scheme left
    pafs.copy_files(src, dst, source_filesystem=src_fs, destination_filesystem=dst_fs)


def remove(location: str) -> None:
    fs, path = filesystem(location)
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        pass


def rmtree(location: str) -> None:
    """A folder and everything under it; nothing when it is not there."""
    fs, path = filesystem(location)
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        fs.delete_dir(path)


# ---- preflight -----------------------------------------------------------------------------

def check_writable(location: str, setting: str) -> None:
    """Before a run writes anything: write and delete a probe object at ``location`` (named by
    ``setting``), and turn what the store answers into an error naming the URI and the setting
    to fix. Local folders are created as today."""
    def probe():
        fresh = not exists(location)
        name = join(location, f".sluice-preflight-{uuid.uuid4().hex}")
        write_bytes(name, b"")
        remove(name)
        if fresh:   # pyarrow keeps an emptied S3 "folder" as a marker object: leave nothing behind
            rmtree(location)
    _check(location, setting, "is not writable", probe)


def check_readable(location: str, setting: str) -> None:
    """Before a run reads ``location``: one request for it, its failure explained as above. A
    location that is not there is the caller's to report, unless its whole bucket is missing
    (which S3 answers as an empty listing)."""
    def probe():
        url = urlparse(location)
        if info(location).type == pafs.FileType.NotFound and \
                info(f"{url.scheme}://{url.netloc}").type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"no_such_bucket: {url.netloc}")
    _check(location, setting, "cannot be read", probe)


def _check(location: str, setting: str, failure: str, probe) -> None:
    if not is_uri(location):
        return
    scheme = urlparse(location).scheme
    if scheme in ("s3", "s3a"):
        endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
        if endpoint.startswith("http://") and os.environ.get("AWS_ALLOW_HTTP", "").lower() not in ("1", "true"):
            raise StorageException(
                f"{location}: AWS_ENDPOINT_URL={endpoint} is plain HTTP, which delta-rs refuses unless "
                f"AWS_ALLOW_HTTP=true is set (or use an https endpoint)")
    try:
        probe()
    except (OSError, ValueError) as e:
        raise StorageException(f"{location} {failure}: {diagnose(scheme, location, setting, str(e))}\n"
                               f"  ({type(e).__name__}: {str(e).strip()[:500]})") from None


_FORBIDDEN = re.compile(r"access denied|access_denied|invalid_?access_?key|signature|forbidden|credentials|\b403\b")


def diagnose(scheme: str, location: str, setting: str, error: str) -> str:
    """What a store's error text says is wrong with ``location``, and the fix."""
    text = error.lower()
    if scheme not in ("s3", "s3a"):
        return f"check {_store_settings(scheme)} and {setting}"
    bucket = urlparse(location).netloc
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or "the AWS default endpoint"
    # The server's error code before a status: an object key or a request id in the text may
    # hold any digits (a preflight key with "...a740390..." read as HTTP 403).
    if any(w in text for w in ("no_such_bucket", "nosuchbucket", "bucket does not exist")):
        return (f"the bucket '{bucket}' does not exist at {endpoint}: create it, or fix the bucket in "
                f"{setting}")
    if _FORBIDDEN.search(text):
        return (f"the credentials were refused by {endpoint}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                f"(and AWS_SESSION_TOKEN for temporary ones) to a key with access to '{bucket}'")
    if any(w in text for w in ("curlcode", "connect", "timed out", "timeout", "resolve", "network")):
        return f"the endpoint {endpoint} cannot be reached: fix AWS_ENDPOINT_URL (and AWS_REGION)"
    return f"check {_store_settings(scheme)}"


def _store_settings(what: str) -> str:
    return {"gs": "GOOGLE_APPLICATION_CREDENTIALS",
            "abfs": "AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY",
            "abfss": "AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY",
            "s3": "AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION"}.get(what, "the store's settings")
