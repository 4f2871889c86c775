"""/metrics against the real API server: token authentication and authorization (TokenReview,
SubjectAccessReview), HTTPS, the caches, and the JobSet counters' labels.

The controller's side of the reviews runs as a ServiceAccount holding only the review rules of
the shipped ClusterRole (manifests/rbac/cluster-role.yaml); the scraper's side as a ServiceAccount
bound to the shipped metrics-reader ClusterRole (manifests/rbac/metrics-reader-role.yaml); a third
ServiceAccount has no role at all.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID
from kubernetes_asyncio.client import ApiClient, Configuration
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from controller.jobset import api
from controller.jobset.metrics import JobSetMetrics
from controller.runtime.client import ClientMetrics, KubeClient, Resource
from controller.runtime.httpserver import OperatorServer, TlsFiles, exposition
from controller.runtime.manager import standard_collectors
from controller.runtime.metricsauth import SUBJECT_ACCESS_REVIEWS, MetricsAuthorizer
from localcluster import audit
from tests.helpers import Kube, wait_for
from tests.support.crd import install_crd
from tests.support.incluster import ROOT, mint_token
from tests.support.jobsets import (
    RunningController,
    complete_job,
    fail_job,
    jobset,
    replicated_job,
    settled,
    wait_condition,
    wait_jobs,
)
from tests.support.replicas import start_replica, wait_until
from tests.support.securemetrics import (
    READER_ROLE,
    controller_flags,
    only,
    render,
    scrape,
    secure_args_and_mount,
)

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)
CONTROLLER_ROLE = ROOT / "manifests" / "rbac" / "cluster-role.yaml"
REVIEW_GROUPS = {"authentication.k8s.io", "authorization.k8s.io"}


@dataclass
class Accounts:
    namespace: str
    tokens: dict[str, str]  # controller, scraper, stranger

    def user(self, account: str) -> str:
        return f"system:serviceaccount:{self.namespace}:{account}"


def _rules(path: Path, keep: Any = lambda rule: True) -> list[dict[str, Any]]:
    role = yaml.safe_load(path.read_text())
    assert role["kind"] == "ClusterRole", path
    return [rule for rule in role["rules"] if keep(rule)]


async def _allowed(admin: KubeClient, user: str, attributes: dict[str, Any]) -> bool:
    """What the API server's authorizer says now (RBAC changes reach it through an informer)."""
    review = {
        "apiVersion": SUBJECT_ACCESS_REVIEWS.api_version,
        "kind": SUBJECT_ACCESS_REVIEWS.kind,
        "spec": {"user": user, "groups": ["system:serviceaccounts"], **attributes},
    }
    answer = await admin.create(SUBJECT_ACCESS_REVIEWS, review)
    return bool(answer["status"].get("allowed"))


@pytest.fixture
async def accounts(kube: Kube, namespace: str) -> AsyncIterator[Accounts]:
    admin = KubeClient(kube.api)
    suffix = uuid.uuid4().hex[:8]
    review_rules = _rules(CONTROLLER_ROLE, lambda r: set(r.get("apiGroups", [])) <= REVIEW_GROUPS)
    assert {r["resources"][0] for r in review_rules} == {"tokenreviews", "subjectaccessreviews"}
    roles = {
        f"metrics-auth-{suffix}": ("controller", review_rules),
        f"metrics-reader-{suffix}": ("scraper", _rules(READER_ROLE)),
    }
    for account in ("controller", "scraper", "stranger"):
        await admin.create(SERVICE_ACCOUNTS, {"metadata": {"name": account}}, namespace)
    for name, (account, rules) in roles.items():
        await admin.create(CLUSTER_ROLES, {"metadata": {"name": name}, "rules": rules})
        await admin.create(
            CLUSTER_ROLE_BINDINGS,
            {
                "metadata": {"name": name},
                "roleRef": {"apiGroup": CLUSTER_ROLES.group, "kind": "ClusterRole", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
            },
        )
    found = Accounts(namespace, {})
    try:
        for account, attributes in (
            (
                "controller",
                {
                    "resourceAttributes": {
                        "group": "authentication.k8s.io",
                        "resource": "tokenreviews",
                        "verb": "create",
                    }
                },
            ),
            ("scraper", {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}),
        ):
            user = found.user(account)

            async def allowed(user: str = user, attributes: dict[str, Any] = attributes) -> bool:
                return await _allowed(admin, user, attributes)

            await wait_for(
                allowed, bool, f"the API server to authorize {user} by its new binding", seconds=30
            )
        for account in ("controller", "scraper", "stranger"):
            found.tokens[account] = await mint_token(kube, namespace, account)
        yield found
    finally:
        for name in roles:
            await admin.delete(CLUSTER_ROLE_BINDINGS, name)
            await admin.delete(CLUSTER_ROLES, name)


def _api_client_as(kube: Kube, token: str) -> ApiClient:
    configuration = Configuration()
    configuration.host = kube.cluster.server
    configuration.ssl_ca_cert = str(kube.cluster.pki.ca_cert)
    configuration.api_key = {"BearerToken": f"Bearer {token}"}
    return ApiClient(configuration)


def _posts(registry: CollectorRegistry) -> float:
    return sum(
        s.value
        for family in registry.collect()
        for s in family.samples
        if s.name == "rest_client_requests_total" and s.labels.get("method") == "POST"
    )


def _reviews_by(kube: Kube, user: str) -> Counter[str]:
    """The reviews ``user`` created, from the API server's audit log, by resource."""
    return Counter(
        str(entry["objectRef"]["resource"])
        for entry in audit.entries(kube.cluster.audit_log, user)
        if entry.get("user", {}).get("username") == user
        and entry.get("verb") == "create"
        and entry.get("objectRef", {}).get("resource") in ("tokenreviews", "subjectaccessreviews")
    )


async def test_token_authentication_authorization_https_and_caches(
    kube: Kube, accounts: Accounts
) -> None:
    registry = CollectorRegistry()
    standard_collectors(registry)
    JobSetMetrics(registry).jobset_completed("team-a", "train")
    now = [1000.0]
    client_registry = CollectorRegistry()
    async with _api_client_as(kube, accounts.tokens["controller"]) as as_controller:
        auth = MetricsAuthorizer(
            KubeClient(as_controller, metrics=ClientMetrics(client_registry)),
            clock=lambda: now[0],
        )
        server = OperatorServer(
            registry,
            metrics_address=("127.0.0.1", 0),
            health_address=("127.0.0.1", 0),
            # The API server's own serving certificate: valid for 127.0.0.1, signed by the CA.
            tls=TlsFiles(kube.cluster.pki.serving_cert, kube.cluster.pki.serving_key),
            auth=auth,
        )
        verify = ssl.create_default_context(cafile=str(kube.cluster.pki.ca_cert))
        async with server, aiohttp.ClientSession() as session:
            metrics_url = f"https://127.0.0.1:{server.bound['metrics'][1]}/metrics"

            async def scrape(token: str | None) -> tuple[int, str]:
                headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
                async with session.get(metrics_url, headers=headers, ssl=verify) as response:
                    return response.status, await response.text()

            status, body = await scrape(None)
            assert status == 401, body
            assert (await scrape("not-a-token"))[0] == 401
            status, body = await scrape(accounts.tokens["stranger"])
            assert status == 403, body
            assert accounts.user("stranger") in body
            status, body = await scrape(accounts.tokens["scraper"])
            assert status == 200, body
            samples = {s.name: s for f in text_string_to_metric_families(body) for s in f.samples}
            assert samples["jobset_completed_total"].labels == {
                "jobset_name": "train",
                "namespace": "team-a",
            }
            assert "process_cpu_seconds_total" in samples
            assert "python_info" in samples
            # Health stays plain HTTP, without a token.
            health = f"http://127.0.0.1:{server.bound['health'][1]}/healthz"
            async with session.get(health) as response:
                assert (response.status, await response.text()) == (200, "ok")

            # So far: a TokenReview each for the bad token, the stranger and the scraper, a
            # SubjectAccessReview each for the last two.
            assert _posts(client_registry) == 5
            for _ in range(5):
                assert (await scrape(accounts.tokens["scraper"]))[0] == 200
            for _ in range(3):
                assert (await scrape(accounts.tokens["stranger"]))[0] == 403
                assert (await scrape("not-a-token"))[0] == 401
            assert _posts(client_registry) == 5, "cached answers must not reach the API server"

            now[0] += 31  # a denial is kept 30 s, an authorization 5 min, a token review 1 min
            assert (await scrape(accounts.tokens["stranger"]))[0] == 403
            assert (await scrape(accounts.tokens["scraper"]))[0] == 200
            assert _posts(client_registry) == 6  # the stranger's access, reviewed again
            now[0] += 30
            assert (await scrape(accounts.tokens["scraper"]))[0] == 200
            assert (await scrape("not-a-token"))[0] == 401
            assert _posts(client_registry) == 8  # two tokens reviewed again

    # The API server's view of who asked: the controller's ServiceAccount, with the shipped
    # role's rules only.
    async def reviews() -> Counter[str]:
        return _reviews_by(kube, accounts.user("controller"))

    await wait_for(
        reviews,
        lambda seen: seen == Counter({"tokenreviews": 5, "subjectaccessreviews": 3}),
        "the controller's reviews in the audit log",
        seconds=15,
    )


async def test_without_the_review_rules_every_scrape_fails_closed(
    kube: Kube, accounts: Accounts
) -> None:
    async with _api_client_as(kube, accounts.tokens["stranger"]) as as_stranger:
        auth = MetricsAuthorizer(KubeClient(as_stranger))
        decision = await auth.check(f"Bearer {accounts.tokens['scraper']}", "GET", "/metrics")
    assert (decision.status, decision.message) == (500, "Authentication failed")


def _granted(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (g, r, v)
        for rule in role["rules"]
        for g in rule.get("apiGroups", [])
        for r in rule.get("resources", [])
        for v in rule["verbs"]
    }


def test_the_install_serves_secure_metrics_by_default(tmp_path: Path) -> None:
    """The base: HTTPS on 8443 (the self-signed certificate, no flag needed), the reader role and
    the controller's review rules; the ServiceMonitor scrapes HTTPS with Prometheus' token."""
    objects = render(tmp_path / "base", "servicemonitor")
    container = only(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "--metrics-bind-address=:8443" in container["args"]
    flags = ("--metrics-secure", "--metrics-auth", "--metrics-cert")
    assert not [a for a in container["args"] if a.startswith(flags)]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "https-metrics": 8443,
        "health": 8081,
    }
    assert container["readinessProbe"]["httpGet"]["port"] == "health"  # probes stay plain
    service = only(objects, "Service")
    assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [
        ("https-metrics", 8443, "https-metrics")
    ]
    (endpoint,) = only(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["scheme"]) == ("https-metrics", "https")
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}  # self-signed: as upstream's
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterRole"}
    reader = roles["stateful-jobset-metrics-reader"]
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    granted = _granted(roles["stateful-jobset-controller"])
    assert ("authentication.k8s.io", "tokenreviews", "create") in granted
    assert ("authorization.k8s.io", "subjectaccessreviews", "create") in granted


def test_the_secure_metrics_component_serves_a_secrets_certificate(tmp_path: Path) -> None:
    alone = render(tmp_path / "alone", "secure-metrics")  # no ServiceMonitor to patch: fine
    assert not [o for o in alone if o["kind"] == "ServiceMonitor"]
    objects = render(tmp_path / "both", "servicemonitor", "secure-metrics")
    args, mount, secret = secure_args_and_mount(objects)
    assert args == [f"--metrics-cert-path={mount}"]
    assert secret == "stateful-jobset-metrics-tls"
    service = only(objects, "Service")
    (endpoint,) = only(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["port"] == "https-metrics" and endpoint["scheme"] == "https"
    meta = service["metadata"]
    assert endpoint["tlsConfig"] == {
        "serverName": f"{meta['name']}.{meta['namespace']}.svc",
        "ca": {"secret": {"name": secret, "key": "ca.crt"}},
    }


def test_the_plain_metrics_component_opts_out(tmp_path: Path) -> None:
    objects = render(tmp_path / "plain", "servicemonitor", "plain-metrics")
    container = only(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "--metrics-bind-address=:8080" in container["args"]
    assert container["args"][-1] == "--metrics-secure=false"
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "http-metrics": 8080,
        "health": 8081,
    }
    service = only(objects, "Service")
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("http-metrics", 8080)]
    (endpoint,) = only(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint == {"port": "http-metrics", "path": "/metrics", "interval": "30s"}


async def test_the_controller_process_serves_secure_metrics_with_the_components_flags(
    kube: Kube, namespace: str, accounts: Accounts, tmp_path: Path
) -> None:
    # The Secret, as the kubelet would mount it (here: the API server's serving certificate).
    certs = tmp_path / "metrics-tls"
    certs.mkdir()
    shutil.copy(kube.cluster.pki.serving_cert, certs / "tls.crt")
    shutil.copy(kube.cluster.pki.serving_key, certs / "tls.key")
    extra = dict(a.split("=", 1) for a in controller_flags(tmp_path / "overlay", certs))
    replica = start_replica(
        kube.cluster.kubeconfig,
        namespace,
        "secure",
        tmp_path,
        lease_name=f"secure-{uuid.uuid4().hex[:6]}",
        extra=extra,
    )
    verify = ssl.create_default_context(cafile=str(kube.cluster.pki.ca_cert))

    def scrape(token: str | None) -> tuple[int, str]:
        request = urllib.request.Request(f"https://127.0.0.1:{replica.metrics_port}/metrics")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=15, context=verify) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read().decode()
        except OSError as err:
            return 0, str(err)

    try:
        await wait_until(lambda: replica.get("/readyz")[0] == 200, "readiness (plain HTTP)")
        assert scrape(None)[0] == 401
        assert scrape(accounts.tokens["stranger"])[0] == 403
        status, body = scrape(accounts.tokens["scraper"])
        assert status == 200, body
        assert "controller_runtime_reconcile_total" in body or "workqueue_depth" in body
        assert "process_start_time_seconds" in body
        serving = [line for line in replica.log_lines() if line.get("endpoint") == "metrics"]
        assert serving and serving[0]["scheme"] == "https" and serving[0]["auth"] is True
    finally:
        replica.process.kill()


def _scrape_verified(port: int, token: str | None, context: ssl.SSLContext) -> tuple[int, str]:
    request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=15, context=context) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()


def _peer_certificate(port: int) -> tuple[x509.Certificate, str]:
    """The certificate the endpoint presents and the TLS version it agreed, read without
    verifying the certificate."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=15) as raw,
        context.wrap_socket(raw) as tls,
    ):
        leaf = tls.getpeercert(binary_form=True)
        version = str(tls.version())
    assert leaf is not None
    return x509.load_der_x509_certificate(leaf), version


async def test_the_controller_process_serves_https_and_checks_tokens_by_default(
    kube: Kube, namespace: str, accounts: Accounts, tmp_path: Path
) -> None:
    """No metrics flag at all: HTTPS with a certificate made at start (self-signed, for localhost
    and 127.0.0.1, as controller-runtime makes it), TLS 1.2 or later, and every scrape's token
    reviewed: none 401, a user without the reader role 403, a reader 200."""
    replica = start_replica(
        kube.cluster.kubeconfig,
        namespace,
        "default-metrics",
        tmp_path,
        lease_name=f"default-{uuid.uuid4().hex[:6]}",
    )
    try:
        await wait_until(lambda: replica.get("/readyz")[0] == 200, "readiness (plain HTTP)")
        status, _ = replica.get("/metrics", replica.metrics_port)
        assert status != 200, "plain HTTP must not be served on the metrics port"
        leaf, version = _peer_certificate(replica.metrics_port)
        assert version in ("TLSv1.2", "TLSv1.3")
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert names.get_values_for_type(x509.DNSName) == ["localhost"]
        assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
        common_name = leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        issuer = leaf.issuer.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        assert str(common_name).startswith("localhost@")
        assert str(issuer).startswith("localhost-ca@")
        # Not a certificate the cluster's CA (or any CA a scraper holds) vouches for.
        with pytest.raises(urllib.error.URLError) as refused:
            _scrape_verified(
                replica.metrics_port,
                accounts.tokens["scraper"],
                ssl.create_default_context(cafile=str(kube.cluster.pki.ca_cert)),
            )
        assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
        assert "self-signed certificate in certificate chain" in str(refused.value.reason)
        assert scrape(replica.metrics_port, None)[0] == 401
        assert scrape(replica.metrics_port, accounts.tokens["stranger"])[0] == 403
        status, body = scrape(replica.metrics_port, accounts.tokens["scraper"])
        assert status == 200, body
        assert "process_start_time_seconds" in body
        serving = [line for line in replica.log_lines() if line.get("endpoint") == "metrics"]
        assert serving and serving[0]["scheme"] == "https" and serving[0]["auth"] is True
        assert serving[0]["certificate"] == "self-signed"
    finally:
        replica.process.kill()


async def test_controller_runtimes_certificate_folder_is_used_when_there(
    kube: Kube, namespace: str, accounts: Accounts, tmp_path: Path
) -> None:
    """Where upstream's chart mounts a cert-manager Secret: $TMPDIR/k8s-metrics-server/
    serving-certs, read without any flag (here the API server's serving certificate, which the
    cluster's CA verifies)."""
    temp = tmp_path / "tmp"
    folder = temp / "k8s-metrics-server" / "serving-certs"
    folder.mkdir(parents=True)
    shutil.copy(kube.cluster.pki.serving_cert, folder / "tls.crt")
    shutil.copy(kube.cluster.pki.serving_key, folder / "tls.key")
    replica = start_replica(
        kube.cluster.kubeconfig,
        namespace,
        "folder-metrics",
        tmp_path,
        lease_name=f"folder-{uuid.uuid4().hex[:6]}",
        env={"TMPDIR": str(temp)},
    )
    verify = ssl.create_default_context(cafile=str(kube.cluster.pki.ca_cert))
    try:
        await wait_until(lambda: replica.get("/readyz")[0] == 200, "readiness (plain HTTP)")
        status, body = _scrape_verified(replica.metrics_port, accounts.tokens["scraper"], verify)
        assert status == 200, body
        serving = [line for line in replica.log_lines() if line.get("endpoint") == "metrics"]
        assert serving and serving[0]["certificate"] == str(folder / "tls.crt")
    finally:
        replica.process.kill()


async def test_plain_http_is_an_explicit_opt_out(
    kube: Kube, namespace: str, tmp_path: Path
) -> None:
    replica = start_replica(
        kube.cluster.kubeconfig,
        namespace,
        "plain-metrics",
        tmp_path,
        lease_name=f"plain-{uuid.uuid4().hex[:6]}",
        extra={"--metrics-secure": "false"},
    )
    try:
        await wait_until(lambda: replica.get("/readyz")[0] == 200, "readiness")
        status, body = replica.get("/metrics", replica.metrics_port)  # no token, no TLS
        assert status == 200, body
        assert "process_start_time_seconds" in body
        serving = [line for line in replica.log_lines() if line.get("endpoint") == "metrics"]
        assert serving and serving[0]["scheme"] == "http" and serving[0]["auth"] is False
        warned = [line["msg"] for line in replica.log_lines() if line.get("level") == "warning"]
        assert any("plain HTTP without authentication" in m for m in warned), warned
    finally:
        replica.process.kill()


async def test_completed_and_failed_counters_name_the_jobset_as_upstream(
    client: KubeClient, controller: RunningController, namespace: str
) -> None:
    await client.create(api.JOBSETS, jobset("done", replicated_job("a", 1)), namespace)
    await client.create(api.JOBSETS, jobset("broken", replicated_job("a", 1)), namespace)
    (done,) = await wait_jobs(client, namespace, "done", 1)
    (broken,) = await wait_jobs(client, namespace, "broken", 1)
    await complete_job(client, namespace, done)
    await fail_job(client, namespace, broken)
    await wait_condition(client, namespace, "done", api.COMPLETED)
    await wait_condition(client, namespace, "broken", api.FAILED)
    # The per-JobSet gauges are read from the informer cache at scrape time: once the API server
    # shows the condition, the cache may not have the status write's event yet.
    await settled(controller, client)
    text = exposition(controller.manager.registry).decode()
    series = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name.startswith("jobset_") and s.labels
    }
    ident = (("jobset_name", "done"), ("namespace", namespace))
    failed_ident = (("jobset_name", "broken"), ("namespace", namespace))
    assert series[("jobset_completed_total", ident)] == 1.0
    assert series[("jobset_failed_total", failed_ident)] == 1.0
    assert series[("jobset_terminal_state", (*ident, ("state", "Completed")))] == 1.0
    assert series[("jobset_terminal_state", (*failed_ident, ("state", "Failed")))] == 1.0
    assert series[("jobset_restarts", ident)] == 0.0
    assert ("jobset_completed_total", failed_ident) not in series


async def test_per_jobset_gauges_leave_out_jobsets_another_controller_manages(
    client: KubeClient, controller: RunningController, namespace: str
) -> None:
    """Beside upstream (a canary), the JobSets upstream runs are not this controller's: its
    per-JobSet gauges must not report them (they would be double-counted with upstream's). They
    are counted per managedBy value instead, which tells an operator what is left alone."""
    await client.create(api.JOBSETS, jobset("ours", replicated_job("a", 1)), namespace)
    other = jobset("theirs", replicated_job("a", 1), managedBy="example.com/other-controller")
    await client.create(api.JOBSETS, other, namespace)
    await wait_jobs(client, namespace, "ours", 1)
    await settled(controller, client)
    text = exposition(controller.manager.registry).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    restarts = {s.labels["jobset_name"] for s in families["jobset_restarts"].samples}
    assert "ours" in restarts
    assert "theirs" not in restarts
    elsewhere = {
        s.labels["managed_by"]: s.value
        for s in families["stateful_jobset_jobsets_managed_elsewhere"].samples
    }
    assert elsewhere == {"example.com/other-controller": 1.0}


def _spec_policy_installed(controller: RunningController) -> float:
    text = exposition(controller.manager.registry).decode()
    (family,) = (
        f
        for f in text_string_to_metric_families(text)
        if f.name == "stateful_jobset_spec_admission_policy_installed"
    )
    (sample,) = family.samples
    return float(sample.value)


async def test_the_spec_policy_metric_follows_the_binding(
    kube: Kube, client: KubeClient, controller: RunningController
) -> None:
    """1 with the CRD's admission policy and binding installed (the ``client`` fixture installs
    them); 0 once the binding is deleted (the API server then enforces nothing); 1 again when it
    is back. The next test's ``client`` fixture would reinstall it anyway."""
    binding = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
    await wait_until(lambda: _spec_policy_installed(controller) == 1.0, "the metric at 1")
    try:
        await kube.raw("DELETE", f"{binding}/jobsets.jobset.x-k8s.io")
        await wait_until(lambda: _spec_policy_installed(controller) == 0.0, "the metric at 0")
    finally:
        await install_crd(kube)
    await wait_until(lambda: _spec_policy_installed(controller) == 1.0, "the metric back at 1")
