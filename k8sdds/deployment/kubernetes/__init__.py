"""The kubernetes backend, split along its seams: `api` (client, calls, the runner's token),
`view` (the cluster's nodes and CNI), `objects` (the run's objects as dicts, pure), `pods`
(pure readings of pods), `watch` (waits), `services`, `metrics` (pure) and `usage`,
`cleanup`, and `backend`."""

from k8sdds.deployment.kubernetes.api import connect
from k8sdds.deployment.kubernetes.backend import KubernetesBackend
from k8sdds.deployment.kubernetes.cleanup import managed_namespaces, remove

__all__ = ["KubernetesBackend", "connect", "managed_namespaces", "remove"]
