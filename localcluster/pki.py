"""Certificates, keys and kubeconfigs for the local control plane.

Everything is generated fresh at start-up into the cluster's state directory: one CA, a serving
certificate for kube-apiserver (valid for 127.0.0.1 and the in-cluster service names), a client
certificate per component with the identity Kubernetes' default RBAC expects of it, and the
service-account signing key pair.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=7)
# The ``kubernetes`` Service's ClusterIP: the first address of the API server's
# --service-cluster-ip-range (cluster.SERVICE_CIDR). Pods on the real node connect to it (relayed
# to the API server, localcluster/apirelay.py) and verify the serving certificate against it.
KUBERNETES_SERVICE_IP = "10.96.0.1"
_SERVING_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class ClientIdentity:
    """Who a component authenticates as (certificate CN = user, O = groups)."""

    file_stem: str
    user: str
    groups: tuple[str, ...] = ()


ADMIN = ClientIdentity("admin", "kubernetes-admin", ("system:masters",))
CONTROLLER_MANAGER = ClientIdentity("kube-controller-manager", "system:kube-controller-manager")
SCHEDULER = ClientIdentity("kube-scheduler", "system:kube-scheduler")
# KWOK writes node and pod status for fake kubelets; the simplest correct identity is an admin.
KWOK = ClientIdentity("kwok", "kwok-controller", ("system:masters",))
PROVISIONER = ClientIdentity("provisioner", "test-provisioner", ("system:masters",))
APISERVER_KUBELET_CLIENT = ClientIdentity(
    "apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)
)


@dataclass(frozen=True)
class Pki:
    """Paths of the generated material."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.directory / "sa.pub"

    def client_cert(self, who: ClientIdentity) -> Path:
        return self.directory / f"{who.file_stem}.crt"

    def client_key(self, who: ClientIdentity) -> Path:
        return self.directory / f"{who.file_stem}.key"

    def kubeconfig(self, who: ClientIdentity) -> Path:
        return self.directory / f"{who.file_stem}.kubeconfig"


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str, groups: tuple[str, ...] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    return x509.Name(attributes)


def _issue(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate | None,
    ca_key: ec.EllipticCurvePrivateKey,
    *,
    is_ca: bool = False,
    usage: x509.ObjectIdentifier | None = None,
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject if ca_cert else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=not is_ca,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=is_ca,
                crl_sign=is_ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def write_kubeconfig(
    path: Path, server: str, ca_cert: Path, client_cert: Path, client_key: Path, user: str
) -> None:
    """A kubeconfig with absolute file references, one cluster, one user, one context."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {"server": server, "certificate-authority": str(ca_cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(client_cert),
                    "client-key": str(client_key),
                },
            }
        ],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


CLIENTS = (ADMIN, CONTROLLER_MANAGER, SCHEDULER, KWOK, PROVISIONER, APISERVER_KUBELET_CLIENT)


def generate(directory: Path, server: str) -> Pki:
    """Create the CA, serving and client certificates, SA keys and per-client kubeconfigs."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _issue(_name("stateful-jobset-local-ca"), ca_key, None, ca_key, is_ca=True)
    _write_key(pki.ca_key, ca_key)
    _write_cert(pki.ca_cert, ca_cert)

    serving_key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in _SERVING_NAMES]
    for ip in ("127.0.0.1", KUBERNETES_SERVICE_IP):
        sans.append(x509.IPAddress(ipaddress.ip_address(ip)))
    serving = _issue(
        _name("kube-apiserver"),
        serving_key,
        ca_cert,
        ca_key,
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        sans=sans,
    )
    _write_key(pki.serving_key, serving_key)
    _write_cert(pki.serving_cert, serving)

    for who in CLIENTS:
        _write_client(pki, who, server, ca_cert, ca_key)

    # Service-account tokens are RS256-signed by default; an RSA key keeps every client happy.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki


def _write_client(
    pki: Pki,
    who: ClientIdentity,
    server: str,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
) -> None:
    """A client certificate for ``who`` signed by the CA, its key, and its kubeconfig."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _issue(
        _name(who.user, who.groups), key, ca_cert, ca_key, usage=ExtendedKeyUsageOID.CLIENT_AUTH
    )
    _write_key(pki.client_key(who), key)
    _write_cert(pki.client_cert(who), cert)
    write_kubeconfig(
        pki.kubeconfig(who),
        server,
        pki.ca_cert,
        pki.client_cert(who),
        pki.client_key(who),
        who.user,
    )


def issue_client(pki: Pki, who: ClientIdentity, server: str) -> Path:
    """One more client certificate (and kubeconfig) signed by an existing CA; returns the
    kubeconfig. A real kubelet is ``system:node:<name>`` in ``system:nodes``, which the Node
    authorizer and NodeRestriction expect of it."""
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    _write_client(pki, who, server, ca_cert, ca_key)
    return pki.kubeconfig(who)


def issue_serving(pki: Pki, directory: Path, common_name: str) -> None:
    """A serving certificate for 127.0.0.1 and localhost signed by the cluster's CA, written as
    ``tls.crt``/``tls.key`` in ``directory`` (a webhook server's cert dir): the API server trusts
    it through the CA, given as the webhook's ``caBundle``."""
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    cert = _issue(
        _name(common_name), key, ca_cert, ca_key, usage=ExtendedKeyUsageOID.SERVER_AUTH, sans=sans
    )
    _write_key(directory / "tls.key", key)
    _write_cert(directory / "tls.crt", cert)
