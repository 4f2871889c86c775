"""Upstream JobSet v0.12.0's manager command lines and Configuration files, as its install
methods pass them (copied from the release's sources; tests/integration/test_manager_process.py
renders upstream's own chart and checks these copies against it)."""

from __future__ import annotations

# charts/jobset/templates/controller/deployment.yaml: the container's args.
CHART_ARGS = ("--zap-log-level=2", "--config=/controller_manager_config.yaml")
# charts/jobset/templates/controller/configmap.yaml with the chart's default values (release
# "jobset"): controller_manager_config.yaml.
CHART_CONFIG = """
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: true
clientConnection:
  qps: 500
  burst: 500
internalCertManagement:
  enable: true
  webhookServiceName: jobset-webhook-service
  webhookSecretName: jobset-webhook-server-cert
"""
# The same with the values CHART_CERT_MANAGER_VALUES (with certManager.enable the chart mounts
# the metrics certificate at /tmp/k8s-metrics-server/serving-certs).
CHART_CERT_MANAGER_VALUES = {
    "certManager": {"enable": True},
    "controller": {
        "leaderElection": {"enable": False},
        "clientConnection": {"qps": 50, "burst": 100},
    },
}
CHART_CONFIG_CERT_MANAGER = """
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
clientConnection:
  qps: 50
  burst: 100
internalCertManagement:
  enable: false
  webhookServiceName: jobset-webhook-service
  webhookSecretName: jobset-webhook-server-cert
"""
# config/components/manager/manager.yaml (the kustomize base): args.
KUSTOMIZE_BASE_ARGS = ("--leader-elect",)
# config/default/manager_config_patch.yaml (the release manifests) replaces them with these.
KUSTOMIZE_DEFAULT_ARGS = ("--config=/controller_manager_config.yaml", "--zap-log-level=2")
# config/components/manager/controller_manager_config.yaml
KUSTOMIZE_CONFIG = """apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: true
internalCertManagement:
  enable: true
"""
# test/e2e/config/default/controller_manager_config.yaml (upstream's own e2e tests)
E2E_CONFIG = """apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: true
internalCertManagement:
  enable: true
tls:
  minVersion: "VersionTLS12"
  # this is the default ciphersuite for golang 1.25
  cipherSuites:
    - TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
    - TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
    - TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
    - TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
    - TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
"""
# Every field of api/config/v1alpha1 (Configuration) that upstream reads, as a user could set them.
FULL_CONFIG = """apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: true
  leaseDuration: 30s
  renewDeadline: 20s
  retryPeriod: 5s
  resourceLock: leases
  resourceName: my-lease
  resourceNamespace: jobset-system
metrics:
  bindAddress: ":9443"
  certDir: /etc/metrics-certs
health:
  healthProbeBindAddress: ":9081"
  readinessEndpointName: /readyz
  livenessEndpointName: /healthz
clientConnection:
  qps: 100.5
  burst: 200
featureGates:
  RestartJob: true
  TLSOptions: true
webhook:
  port: 9443
  host: 0.0.0.0
  certDir: /tmp/k8s-webhook-server/serving-certs
internalCertManagement:
  enable: false
  webhookServiceName: jobset-webhook-service
  webhookSecretName: jobset-webhook-server-cert
tls:
  minVersion: VersionTLS13
"""
