"""k8sdds: benchmark publish/subscribe middleware (DDS) on edge Kubernetes clusters."""

__version__ = "0.1.0"
