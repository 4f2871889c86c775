"""Real-node tests with Kueue and Kubeflow Trainer, on one node of their own (conftest.py)."""

# The repository's Trainer runtime with its claim on the real node's CSI storage (WFFC).
CSI_RUNTIME = "busybox-llm-csi"
