"""The JobSet API as served by the Kubernetes API server: the CustomResourceDefinition.

``schema`` holds the hand-written JobSet part of the schema (fields, defaults, CEL rules);
``crdgen`` inlines the embedded Kubernetes types (Job template, PersistentVolumeClaim) from the API
server's own OpenAPI documents and writes ``manifests/crd/jobsets.jobset.x-k8s.io.yaml``.
"""
