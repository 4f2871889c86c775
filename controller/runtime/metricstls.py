"""TLS of the metrics endpoint: which certificate, which protocol versions and cipher suites.

The certificate is found as controller-runtime's metrics server finds it (upstream JobSet's):

1. the folder given (``--metrics-cert-path``; upstream's ``metrics.certDir``), re-read when
   its files change;
2. else controller-runtime's own folder, ``$TMPDIR/k8s-metrics-server/serving-certs`` (``/tmp``
   without TMPDIR), if both files are there (where upstream's chart mounts a cert-manager
   Secret);
3. else a self-signed certificate made at start and kept in memory (never written to a file
   system: upstream's chart leaves none writable): a CA and a serving
   certificate for ``localhost`` and ``127.0.0.1`` signed by it, valid one year, RSA 2048, as
   client-go's ``GenerateSelfSignedCertKeyWithFixtures`` makes it. Nothing can verify it, but the
   traffic (bearer tokens included) is encrypted; scrapers skip verification (upstream's
   ServiceMonitor says ``insecureSkipVerify: true``) or use a certificate of their own (1.).

Protocol versions and cipher suites use upstream's names (its ``tls`` settings: Go's constant
names, ``VersionTLS12``, ``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import ssl
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# controller-runtime's metrics server: filepath.Join(os.TempDir(), "k8s-metrics-server",
# "serving-certs"), with tls.crt and tls.key in it. Go's os.TempDir is $TMPDIR, else /tmp, with no
# check that it is writable (Python's tempfile.gettempdir would fail on a read-only /tmp).
DEFAULT_CERT_DIR_HELP = "$TMPDIR/k8s-metrics-server/serving-certs"


def default_cert_dir() -> Path:
    return Path(os.environ.get("TMPDIR") or "/tmp") / "k8s-metrics-server" / "serving-certs"


SELF_SIGNED_VALIDITY = datetime.timedelta(days=365)

TLS_VERSIONS = {"VersionTLS12": ssl.TLSVersion.TLSv1_2, "VersionTLS13": ssl.TLSVersion.TLSv1_3}
# Go's cipher suite names (crypto/tls, what k8s.io/component-base's flag accepts) → OpenSSL's.
CIPHER_SUITES = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",  # legacy name
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",  # legacy name
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
}
# TLS 1.3's suites: accepted, and not configurable (neither Go nor OpenSSL's cipher list sets
# them), as upstream.
TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")


@dataclass(frozen=True)
class TlsFiles:
    """The serving certificate (chain, PEM) and its private key (PEM)."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class SelfSigned:
    """A certificate made at start, in memory (controller-runtime's fallback)."""


def certificate_source(cert_dir: str, cert_name: str, key_name: str) -> TlsFiles | SelfSigned:
    """Where the metrics certificate comes from (the module docstring's order)."""
    if cert_dir:
        return TlsFiles(Path(cert_dir) / cert_name, Path(cert_dir) / key_name)
    folder = default_cert_dir()
    default = TlsFiles(folder / cert_name, folder / key_name)
    if default.cert.is_file() and default.key.is_file():
        return default
    return SelfSigned()


class TlsOptionsError(ValueError):
    """A protocol version or cipher suite this controller cannot serve; the message says which,
    ``setting`` whether the version (``tls_min_version``) or the suites (``tls_cipher_suites``)."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting


@dataclass(frozen=True)
class TlsOptions:
    min_version: str = "VersionTLS12"
    cipher_suites: tuple[str, ...] = ()  # Go's names; empty: OpenSSL's defaults

    def apply(self, context: ssl.SSLContext) -> None:
        context.minimum_version = TLS_VERSIONS[self.min_version]
        openssl = [CIPHER_SUITES[name] for name in self.cipher_suites if name in CIPHER_SUITES]
        if openssl:
            context.set_ciphers(":".join(openssl))


def tls_options(min_version: str, cipher_suites: tuple[str, ...]) -> TlsOptions:
    """Checked options: upstream's rules (TLS 1.2 or 1.3; suites only with 1.2, which is where
    they apply) and the suites this process's OpenSSL can serve."""
    if min_version in ("VersionTLS10", "VersionTLS11"):
        raise TlsOptionsError(
            "tls_min_version",
            f"{min_version} is not supported: use VersionTLS12 or VersionTLS13 (as upstream)",
        )
    if min_version not in TLS_VERSIONS:
        raise TlsOptionsError(
            "tls_min_version",
            f"unknown TLS version {min_version!r}: use VersionTLS12 or VersionTLS13",
        )
    if min_version == "VersionTLS13" and cipher_suites:
        raise TlsOptionsError(
            "tls_cipher_suites",
            "cipher suites may not be given with VersionTLS13 (TLS 1.3's suites are not "
            "configurable)",
        )
    known = {*CIPHER_SUITES, *TLS13_SUITES}
    unknown = [name for name in cipher_suites if name not in known]
    if unknown:
        raise TlsOptionsError(
            "tls_cipher_suites",
            f"unknown cipher suite{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} (Go's "
            f"names, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)",
        )
    unavailable = []
    for name in cipher_suites:
        if name in CIPHER_SUITES:
            try:
                ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(CIPHER_SUITES[name])
            except ssl.SSLError:
                unavailable.append(name)
    if unavailable:
        raise TlsOptionsError(
            "tls_cipher_suites",
            f"cipher suite{'s' if len(unavailable) > 1 else ''} {', '.join(unavailable)} "
            f"{'are' if len(unavailable) > 1 else 'is'} not available in this process's TLS "
            f"library ({ssl.OPENSSL_VERSION})",
        )
    return TlsOptions(min_version, tuple(cipher_suites))


def self_signed_pem(
    host: str = "localhost",
    ips: tuple[str, ...] = ("127.0.0.1",),
    now: datetime.datetime | None = None,
) -> tuple[bytes, bytes]:
    """(certificate chain, private key), PEM: a serving certificate for ``host`` and ``ips``
    signed by a CA made for it, the CA's certificate after it; as client-go's
    ``GenerateSelfSignedCertKeyWithFixtures`` (names ``<host>@<unix time>`` and
    ``<host>-ca@<unix time>``, RSA 2048, one year)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    start = now or datetime.datetime.now(datetime.UTC)
    stamp = int(start.timestamp())
    not_before = start - datetime.timedelta(hours=1)  # clock skew between replicas and scrapers
    not_after = start + SELF_SIGNED_VALIDITY

    def name(common_name: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    def usage(*, cert_sign: bool) -> x509.KeyUsage:
        return x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=True,
            data_encipherment=False, key_agreement=False, key_cert_sign=cert_sign,
            crl_sign=False, encipher_only=False, decipher_only=False,
        )  # fmt: skip

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = name(f"{host}-ca@{stamp}")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(usage(cert_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(f"{host}@{stamp}"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(
        serialization.Encoding.PEM
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return chain, key_pem


def load_pem(context: ssl.SSLContext, chain: bytes, key: bytes) -> None:
    """Load a PEM pair that exists only in memory. Python's ssl module reads certificates from
    files only: on Linux they are anonymous memory files (memfd, read through /proc/self/fd),
    which need no writable file system; elsewhere (a developer's machine) files in a folder only
    this user can read, removed at once."""
    if sys.platform == "linux" and hasattr(os, "memfd_create"):
        descriptors = []
        try:
            for name, data in (("tls.crt", chain), ("tls.key", key)):
                descriptor = os.memfd_create(name, os.MFD_CLOEXEC)
                descriptors.append(descriptor)
                os.write(descriptor, data)
            cert_file, key_file = (f"/proc/self/fd/{d}" for d in descriptors)
            context.load_cert_chain(cert_file, key_file)
        finally:
            for descriptor in descriptors:
                os.close(descriptor)
        return
    folder = Path(tempfile.mkdtemp(prefix="stateful-jobset-metrics-"))  # mode 0700
    try:
        cert_file_path, key_file_path = folder / "tls.crt", folder / "tls.key"
        for path, data in ((cert_file_path, chain), (key_file_path, key)):
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(handle, "wb") as out:
                out.write(data)
        context.load_cert_chain(cert_file_path, key_file_path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def self_signed_context(options: TlsOptions) -> ssl.SSLContext:
    """A server context with a certificate made now (see ``self_signed_pem``)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    options.apply(context)
    load_pem(context, *self_signed_pem())
    return context
