"""Every configured secret is found in the settings and masked in text and data."""

from __future__ import annotations

from pydantic import SecretStr

from verification.config import Settings
from verification.redaction import MASK, Redactor, configured_secrets

PEM = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIBx7Zp0q9vYh3p1Yw2m9Qq\n-----END PRIVATE KEY-----\n"


def settings_with_secrets() -> Settings:
    settings = Settings()
    settings.postgres.repo_cipher_pass = SecretStr("cipher-Pass-1")
    settings.evidence.signing_key = SecretStr(PEM)
    settings.results_url = "postgresql+psycopg://restoreproof:Store%40Pass-2@127.0.0.1:5432/results"
    settings.metrics.pushgateway_url = "http://push:Push-Pass-3@127.0.0.1:9091/"
    return settings


def test_every_secret_setting_and_url_password_is_found():
    secrets = configured_secrets(settings_with_secrets())
    assert {"cipher-Pass-1", "Store@Pass-2", "Push-Pass-3", "MC4CAQAwBQYDK2VwBCIEIBx7Zp0q9vYh3p1Yw2m9Qq"} <= set(secrets)
    # Longest first, so a secret that contains another is masked whole.
    assert secrets == sorted(secrets, key=len, reverse=True)


def test_no_secret_configured_masks_nothing():
    assert configured_secrets(Settings()) == []
    assert Redactor(Settings())("pgbackrest restore: cipher-Pass-1") == "pgbackrest restore: cipher-Pass-1"


def test_text_and_nested_data_are_masked():
    redact = Redactor(settings_with_secrets())
    assert redact("PGBACKREST_REPO1_CIPHER_PASS=cipher-Pass-1 exit 1") == f"PGBACKREST_REPO1_CIPHER_PASS={MASK} exit 1"
    data = {"reasons": ["could not connect: Store@Pass-2"], "checks": [{"findings": ("Push-Pass-3",)}],
            "n": 3, "cipher-Pass-1": None}
    assert redact.data(data) == {"reasons": [f"could not connect: {MASK}"], "checks": [{"findings": (MASK,)}],
                                 "n": 3, MASK: None}


def test_a_typed_report_entry_is_masked_everywhere_and_stays_typed() -> None:
    from tests.unit.factories import complete_plan, online_outcome, passed_check
    from verification.model import DatabaseResult, RestorePoint, Verdict
    from verification.reports.json_report import database_entry

    secret = "hunter2-secret"
    outcome = online_outcome(passed_check())
    outcome.checks[0].findings.append(f"password={secret}")
    result = DatabaseResult("demo1", Verdict.FAILED, [f"login failed for {secret}"], complete_plan(),
                            RestorePoint("latest", detail=f"dsn postgresql://u:{secret}@h/db"), outcome.phases,
                            outcome.checks, target={secret: secret})
    entry = database_entry(result)
    masked = Redactor(secrets=[secret]).model(entry)
    assert type(masked) is type(entry) and masked.chain == entry.chain
    assert secret not in masked.model_dump_json() and secret in entry.model_dump_json()
    assert masked.reasons == [f"login failed for {MASK}"]
    assert masked.checks[0].findings == [f"password={MASK}"] and masked.target == {MASK: MASK}
    assert Redactor(secrets=[]).model(entry) is entry
