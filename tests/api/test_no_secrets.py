"""No secret in the repository, the logs or the responses: every tracked file is scanned for
private keys, keys in this service's format, cloud and forge tokens, and passwords in URLs
(other than the documented local CI/dev ones); a key's plaintext never reaches a log line or a
response, success or error, and only its SHA-256 is stored."""

from __future__ import annotations

import logging
import re
import subprocess
from pathlib import Path

import pytest
from api_support import bearer, create_key, example_body, running_client
from sqlalchemy import create_engine, text

from service.api.keys import generate_key, hash_key

REPO = Path(__file__).resolve().parents[2]

# Patterns are split so that this file does not match itself.
SECRET_PATTERNS = {
    "private key": re.compile(rb"-----BEGIN [A-Z ]*" + rb"PRIVATE KEY-----"),
    "service API key": re.compile(rb"\blq" + rb"_[0-9a-f]{12}_[A-Za-z0-9_-]{43}"),
    "AWS access key id": re.compile(rb"\b(AKIA|ASIA)" + rb"[0-9A-Z]{16}\b"),
    "AWS secret key": re.compile(rb"(?i)aws_secret_access_key" + rb"\s*[:=]\s*\S{20,}"),
    "GitHub token": re.compile(rb"\bgh[pousr]_" + rb"[A-Za-z0-9]{36,}"),
    "Slack token": re.compile(rb"\bxox[abprs]-" + rb"[A-Za-z0-9-]{10,}"),
    "quoted credential": re.compile(
        rb"(?i)(password|passwd|secret|api_key|token)[\"']?\s*[:=]\s*[\"'][^\"'\s]{12,}[\"']"
    ),
}
URL_PASSWORD = re.compile(rb"[a-zA-Z][a-zA-Z0-9+.-]*://([^/\s:@\"'`]+):([^/\s@\"'`]+)@")
# user:password pairs documented as local-only: CI's throwaway role, docker-compose's dev
# database, README placeholders, a test's unreachable server, shell variables.
DOCUMENTED_LOCAL = {
    (b"quotes_ci", b"quotes_ci"),
    (b"quotes", b"quotes"),
    (b"user", b"pw"),
    (b"nobody", b"nothing"),
    (b"$PG_USER", b"$PG_PASSWORD"),
}


def tracked_files() -> list[Path]:
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout
    return [REPO / name.decode() for name in listing.split(b"\0") if name]


def secrets_in(content: bytes) -> list[str]:
    found = [name for name, pattern in SECRET_PATTERNS.items() if pattern.search(content)]
    for user, password in URL_PASSWORD.findall(content):
        if (user, password) not in DOCUMENTED_LOCAL:
            found.append(f"password in URL for {user.decode(errors='replace')}")
    return found


def test_the_scanner_finds_each_kind_of_secret() -> None:
    planted = [
        b"-----BEGIN RSA " + b"PRIVATE KEY-----\nMIIE",
        generate_key().secret.encode(),
        b"id = AKIA" + b"ABCDEFGHIJKLMNOP",
        b"aws_secret_access_key = " + b"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        b"token: gh" + b"p_" + b"a" * 36,
        b"DATABASE_URL=postgresql://admin:" + b"hunter2hunter2@db.internal/prod",
        b'{"password": "' + b"correct-horse-battery" + b'"}',
    ]
    for content in planted:
        assert secrets_in(content), content
    assert secrets_in(b"postgresql+psycopg://quotes_ci:quotes_ci@127.0.0.1:5432/quotes_ci") == []


def test_no_tracked_file_holds_a_secret() -> None:
    files = tracked_files()
    assert len(files) > 50
    leaks = {
        str(path.relative_to(REPO)): found
        for path in files
        if path.is_file() and (found := secrets_in(path.read_bytes()))
    }
    assert leaks == {}


def test_a_keys_plaintext_never_reaches_logs_or_responses(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret = create_key(database_url, "leaky", "estimate,billing")
    prefix = secret.split("_")[1]
    caplog.set_level(logging.DEBUG)
    answers = []
    with running_client(database_url, log_level="DEBUG") as client:
        key = bearer(secret)
        answers.append(client.post("/v1/estimate", json=example_body(), headers=key))
        answers.append(client.post("/v1/estimate", json=example_body(colour=1), headers=key))
        answers.append(client.get("/v1/quotes/q_missing", headers=key))
        answers.append(client.get("/v1/quotes", headers=key))
        answers.append(client.post("/v1/calibrations", json={}, headers=key))  # 403
        answers.append(client.get("/v1/quotes", headers=bearer(secret + "x")))  # 401
        answers.append(client.get("/v1/quotes", headers={"Authorization": secret}))  # 401
        answers.append(client.get("/v1/health", headers=key))
        answers.append(client.get("/metrics", headers=key))
    assert [a.status_code for a in answers] == [200, 422, 404, 200, 403, 401, 401, 200, 200]
    assert caplog.records, "nothing was logged: the test would prove nothing"
    logged = caplog.text + "".join(str(r.args) for r in caplog.records)
    for leak in (secret, secret[len(prefix) + 4 :], hash_key(secret)):
        assert leak not in logged
        for answer in answers:
            assert leak not in answer.text
            assert all(leak not in value for value in answer.headers.values())


def test_keys_are_stored_as_sha256_only(database_url: str) -> None:
    secret = create_key(database_url, "hashed", "estimate")
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT * FROM api_keys")).all()
    finally:
        engine.dispose()
    stored = " ".join(str(value) for row in rows for value in row)
    assert hash_key(secret) in stored
    assert secret not in stored and secret.split("_", 2)[2] not in stored
