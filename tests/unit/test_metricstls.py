"""The metrics endpoint's TLS: where its certificate comes from, the self-signed one made at
start, and upstream's protocol-version and cipher-suite settings, served for real on loopback."""

from __future__ import annotations

import asyncio
import datetime
import ssl
import tempfile
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from prometheus_client import CollectorRegistry

from controller.runtime import metricstls
from controller.runtime.httpserver import OperatorServer
from controller.runtime.metricstls import (
    SelfSigned,
    TlsFiles,
    TlsOptions,
    TlsOptionsError,
    certificate_source,
    self_signed_pem,
    tls_options,
)
from tests.support.certs import write_self_signed


def _cn(name: x509.Name) -> str:
    return str(name.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def test_the_self_signed_certificate_is_client_gos() -> None:
    now = datetime.datetime(2026, 5, 1, 12, 0, tzinfo=datetime.UTC)
    chain, key_pem = self_signed_pem(now=now)
    leaf, ca = x509.load_pem_x509_certificates(chain)
    stamp = int(now.timestamp())
    assert (_cn(leaf.subject), _cn(leaf.issuer)) == (f"localhost@{stamp}", f"localhost-ca@{stamp}")
    assert _cn(ca.subject) == _cn(ca.issuer) == f"localhost-ca@{stamp}"
    leaf.verify_directly_issued_by(ca)
    ca.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert leaf.not_valid_after_utc - now == datetime.timedelta(days=365)
    assert leaf.not_valid_before_utc <= now
    key = load_pem_private_key(key_pem, password=None)
    assert isinstance(key, rsa.RSAPrivateKey) and key.key_size == 2048
    assert key.public_key().public_numbers() == leaf.public_key().public_numbers()  # type: ignore[union-attr]


def test_each_start_makes_its_own() -> None:
    first, second = self_signed_pem()[1], self_signed_pem()[1]
    assert first != second


def test_where_the_certificate_comes_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given = tmp_path / "given"
    default = tmp_path / "k8s-metrics-server" / "serving-certs"
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    # 1. The folder given, as it is (config.py checked that the files exist).
    assert certificate_source(str(given), "a.crt", "a.key") == TlsFiles(
        given / "a.crt", given / "a.key"
    )
    # 3. Nothing given, nothing in controller-runtime's folder: self-signed.
    assert certificate_source("", "tls.crt", "tls.key") == SelfSigned()
    default.mkdir(parents=True)
    (default / "tls.crt").write_text("only the certificate")
    assert certificate_source("", "tls.crt", "tls.key") == SelfSigned()
    # 2. Both files in controller-runtime's folder.
    (default / "tls.key").write_text("and its key")
    assert certificate_source("", "tls.crt", "tls.key") == TlsFiles(
        default / "tls.crt", default / "tls.key"
    )


def test_controller_runtimes_folder_is_gos_temporary_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Go's os.TempDir: $TMPDIR, else /tmp, writable or not (upstream's chart mounts the
    certificate under a read-only /tmp)."""
    monkeypatch.delenv("TMPDIR", raising=False)
    assert metricstls.default_cert_dir() == Path("/tmp/k8s-metrics-server/serving-certs")
    monkeypatch.setenv("TMPDIR", "/scratch")
    assert metricstls.default_cert_dir() == Path("/scratch/k8s-metrics-server/serving-certs")


def test_the_self_signed_certificate_never_touches_a_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loaded from memory: no temporary folder is asked for (a read-only root file system, as
    upstream's chart has it, has none)."""

    def no_temporary_folder(*args: object, **kwargs: object) -> str:
        raise AssertionError("a temporary folder was asked for")

    monkeypatch.setattr(tempfile, "mkdtemp", no_temporary_folder)
    context = metricstls.self_signed_context(TlsOptions())
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


def _client(maximum: ssl.TLSVersion | None = None, ciphers: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if maximum is not None:
        context.maximum_version = maximum
    if ciphers is not None:
        context.set_ciphers(ciphers)
    return context


async def _handshake(port: int, context: ssl.SSLContext) -> tuple[str, str, bytes]:
    """(TLS version, cipher, the server's certificate DER) of one connection."""
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    try:
        tls = writer.get_extra_info("ssl_object")
        der = tls.getpeercert(binary_form=True)
        return str(tls.version()), str(tls.cipher()[0]), der
    finally:
        writer.close()
        await writer.wait_closed()


async def test_a_self_signed_endpoint_serves_https() -> None:
    server = OperatorServer(
        CollectorRegistry(), metrics_address=("127.0.0.1", 0), health_address=None,
        tls=SelfSigned(),
    )  # fmt: skip
    async with server:
        version, _, der = await _handshake(server.bound["metrics"][1], _client())
        assert version in ("TLSv1.2", "TLSv1.3")
        assert _cn(x509.load_der_x509_certificate(der).subject).startswith("localhost@")
        assert server.scheme == "https"


async def test_tls_13_only(tmp_path: Path) -> None:
    write_self_signed(tmp_path, "x")
    server = OperatorServer(
        CollectorRegistry(), metrics_address=("127.0.0.1", 0), health_address=None,
        tls=TlsFiles(tmp_path / "tls.crt", tmp_path / "tls.key"),
        tls_options=tls_options("VersionTLS13", ()),
    )  # fmt: skip
    async with server:
        port = server.bound["metrics"][1]
        assert (await _handshake(port, _client()))[0] == "TLSv1.3"
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await _handshake(port, _client(maximum=ssl.TLSVersion.TLSv1_2))


async def test_cipher_suites_by_gos_names() -> None:
    options = tls_options("VersionTLS12", ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",))
    server = OperatorServer(
        CollectorRegistry(), metrics_address=("127.0.0.1", 0), health_address=None,
        tls=SelfSigned(), tls_options=options,
    )  # fmt: skip
    async with server:
        port = server.bound["metrics"][1]
        tls12 = ssl.TLSVersion.TLSv1_2
        found = await _handshake(port, _client(maximum=tls12))
        assert found[:2] == ("TLSv1.2", "ECDHE-RSA-AES256-GCM-SHA384")
        with pytest.raises((ssl.SSLError, ConnectionError)):  # a suite not offered
            await _handshake(port, _client(maximum=tls12, ciphers="ECDHE-RSA-AES128-GCM-SHA256"))


@pytest.mark.parametrize(
    ("version", "suites", "setting", "message"),
    [
        ("VersionTLS10", (), "tls_min_version", "VersionTLS10 is not supported"),
        ("TLS1.2", (), "tls_min_version", "unknown TLS version 'TLS1.2'"),
        ("VersionTLS13", ("TLS_AES_128_GCM_SHA256",), "tls_cipher_suites", "may not be given"),
        ("VersionTLS12", ("TLS_X", "TLS_Y"), "tls_cipher_suites", "unknown cipher suites TLS_X"),
    ],
)
def test_bad_tls_options(version: str, suites: tuple[str, ...], setting: str, message: str) -> None:
    with pytest.raises(TlsOptionsError, match=message) as raised:
        tls_options(version, suites)
    assert raised.value.setting == setting


def test_every_go_name_is_known_and_tls13_suites_are_accepted() -> None:
    accepted = tls_options(
        "VersionTLS12", ("TLS_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_128_CBC_SHA")
    )
    assert accepted == TlsOptions(
        "VersionTLS12", ("TLS_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_128_CBC_SHA")
    )
    for name, openssl in metricstls.CIPHER_SUITES.items():
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(openssl)
        except ssl.SSLError:
            # RC4 and 3DES: not in this OpenSSL; refused with the reason.
            with pytest.raises(TlsOptionsError, match=f"{name} is not available"):
                tls_options("VersionTLS12", (name,))
        else:
            assert tls_options("VersionTLS12", (name,)).cipher_suites == (name,)
