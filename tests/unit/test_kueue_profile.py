"""Pure parts of the ``kueue`` profile (localcluster/kueue.py): what is built, the manifests made
from Kueue's, its configuration and certificates. The profile runs in tests/e2e/test_kueue.py.
"""

from __future__ import annotations

import hashlib
import ipaddress
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from localcluster import build, kueue, pki


def test_kueue_and_its_apiserver_are_built_only_on_demand(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    def fake_build(component: build.Component, goversion: str, report: object) -> Path:
        built.append(component.name)
        return Path("/nowhere") / component.name

    monkeypatch.setattr(build, "go_version", lambda: "go1.26.8")
    monkeypatch.setattr(build, "build_component", fake_build)
    build.ensure_binaries(lambda _: None)
    assert "kueue" not in built and build.VERSIONED_APISERVER.name not in built
    assert build.ensure_kueue(lambda _: None) == Path("/nowhere/kueue/kueue")
    assert build.ensure_versioned_apiserver(lambda _: None).name == "kube-apiserver"
    assert build.required_versions(build.KUEUE) == {"sigs.k8s.io/kueue": kueue.version()}


def test_kueue_needs_no_local_jobset_source() -> None:
    """Kueue's module requires sigs.k8s.io/jobset; the module proxy serves that release, so the
    wrapper pins it through go.sum like any dependency: no replace to a local tree."""
    module = build.KUEUE.module_dir
    gomod = (module / "go.mod").read_text()
    assert "replace" not in gomod
    required = next(
        line.split()[1]
        for line in gomod.splitlines()
        if line.strip().startswith("sigs.k8s.io/jobset ")
    )
    assert f"sigs.k8s.io/jobset {required} h1:" in (module / "go.sum").read_text()


def test_the_versioned_apiserver_is_the_suites_release_with_its_version_linked_in() -> None:
    kubernetes = next(c for c in build.COMPONENTS if c.name == "kubernetes")
    versioned = build.VERSIONED_APISERVER
    release = build.required_versions(kubernetes)["k8s.io/kubernetes"]
    assert versioned.module_dir == kubernetes.module_dir
    assert f"k8s.io/component-base/version.gitVersion={release}" in versioned.ldflags
    assert versioned.ldflags.startswith(build._LDFLAGS + " ")
    assert build.component_dir(versioned, "go1.26.8") != build.component_dir(kubernetes, "go1.26.8")


def test_cache_keys_without_extra_ldflags_are_as_before() -> None:
    """The control plane's cache key is what it was before components could carry linker flags:
    adding the kueue profile rebuilds nothing that is cached."""
    kubernetes = next(c for c in build.COMPONENTS if c.name == "kubernetes")
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((kubernetes.module_dir / name).read_bytes())
    digest.update(b"go1.26.8")
    digest.update(b"-s -w")
    digest.update(repr(kubernetes.targets).encode())
    assert build.cache_key(kubernetes, "go1.26.8") == digest.hexdigest()[:16]


def _hook(name: str, group: str, path: str) -> dict[str, object]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {
            "service": {"name": "webhook-service", "namespace": "system", "path": path}
        },
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "rules": [
            {
                "apiGroups": [group],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["x"],
            }
        ],
    }


def test_webhooks_are_kueues_and_jobsets_called_by_url(tmp_path: Path) -> None:
    source = tmp_path / "kueue"
    manifest = source / "config/components/webhook/manifests.yaml"
    manifest.parent.mkdir(parents=True)
    docs = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [
                _hook("mjob.kb.io", "batch", "/mutate-batch-v1-job"),
                _hook("mjobset.kb.io", "jobset.x-k8s.io", "/mutate-jobset"),
                _hook("mpod.kb.io", "", "/mutate--v1-pod"),
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [_hook("vclusterqueue.kb.io", "kueue.x-k8s.io", "/validate-cq")],
        },
    ]
    manifest.write_text(yaml.safe_dump_all(docs))
    mutating, validating = kueue.webhook_configurations(source, "https://127.0.0.1:9443", "Q0E=")
    assert mutating["metadata"] == {"name": kueue.MUTATING}
    assert validating["metadata"] == {"name": kueue.VALIDATING}
    assert [h["name"] for h in mutating["webhooks"]] == ["mjobset.kb.io"]
    assert mutating["webhooks"][0]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate-jobset",
        "caBundle": "Q0E=",
    }
    assert mutating["webhooks"][0]["failurePolicy"] == "Fail"
    assert [h["name"] for h in validating["webhooks"]] == ["vclusterqueue.kb.io"]


def test_crds_with_conversion_call_the_local_manager(tmp_path: Path) -> None:
    bases = tmp_path / "config/components/crd/bases"
    bases.mkdir(parents=True)
    for plural in ("workloads", "resourceflavors"):
        crd = {"kind": "CustomResourceDefinition", "spec": {"names": {"plural": plural}}}
        (bases / f"kueue.x-k8s.io_{plural}.yaml").write_text(yaml.safe_dump(crd))
    by_plural = {
        c["spec"]["names"]["plural"]: c
        for c in kueue.crds(tmp_path, "https://127.0.0.1:9443", "Q0E=")
    }
    assert "conversion" not in by_plural["resourceflavors"]["spec"]
    conversion = by_plural["workloads"]["spec"]["conversion"]
    assert conversion["strategy"] == "Webhook"
    assert conversion["webhook"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/convert",
        "caBundle": "Q0E=",
    }


def test_configuration_enables_the_jobset_integration_only(tmp_path: Path) -> None:
    config = kueue.configuration(9443, 8081, tmp_path)
    assert config["integrations"] == {"frameworks": ["jobset.x-k8s.io/jobset"]}
    assert config["manageJobsWithoutQueueName"] is False
    assert config["internalCertManagement"] == {"enable": False}
    assert config["webhook"] == {"port": 9443, "host": "127.0.0.1", "certDir": str(tmp_path)}
    assert config["leaderElection"] == {"leaderElect": False}


def test_the_default_queue_has_the_kwok_nodes_capacity() -> None:
    flavor, cq, lq = kueue.queues(gpus=32, cpu=128, memory_gi=1024)
    assert flavor["spec"]["nodeLabels"] == kueue.FLAVOR_NODE_LABELS
    [group] = cq["spec"]["resourceGroups"]
    resources = {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}
    assert resources == {"cpu": "128", "memory": "1024Gi", kueue.GPU: "32"}
    assert cq["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority"}
    assert lq["metadata"] == {"name": kueue.LOCAL_QUEUE, "namespace": "default"}
    assert lq["spec"] == {"clusterQueue": kueue.CLUSTER_QUEUE}


def test_webhook_serving_certificate_chains_to_the_cluster_ca(tmp_path: Path) -> None:
    material = pki.generate(tmp_path / "pki", "https://127.0.0.1:6443")
    pki.issue_serving(material, tmp_path / "certs", "kueue-webhook")
    cert = x509.load_pem_x509_certificate((tmp_path / "certs" / "tls.crt").read_bytes())
    ca = x509.load_pem_x509_certificate(material.ca_cert.read_bytes())
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert (tmp_path / "certs" / "tls.key").stat().st_mode & 0o077 == 0


def test_metrics_certificate_is_written_once(tmp_path: Path) -> None:
    directory = tmp_path / "metrics"
    kueue.ensure_metrics_cert(directory)
    first = (directory / "tls.crt").read_bytes()
    x509.load_pem_x509_certificate(first)
    kueue.ensure_metrics_cert(directory)
    assert (directory / "tls.crt").read_bytes() == first


def test_metrics_certificate_is_written_once_by_starts_at_the_same_time(tmp_path: Path) -> None:
    """Kueue managers of two local clusters may start at once (make test's groups side by
    side): one writes the pair, the other finds it and keeps it."""
    directory = tmp_path / "metrics"
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda _: kueue.ensure_metrics_cert(directory), range(8)))
    key = serialization.load_pem_private_key((directory / "tls.key").read_bytes(), password=None)
    cert = x509.load_pem_x509_certificate((directory / "tls.crt").read_bytes())

    def spki(public: object) -> bytes:
        assert isinstance(public, ec.EllipticCurvePublicKey)
        return public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    assert spki(cert.public_key()) == spki(key.public_key())  # the key of the certificate
