"""Access to one cluster's API through the official client: the kubeconfig's own
credentials for what lies outside the run's namespace, and a bound token of the runner
ServiceAccount (renewed at half its life) for everything inside it. Every failure becomes a
KubernetesError that says what was attempted."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from k8sdds.deployment.kubernetes import objects as m
from k8sdds.errors import KubernetesError, UserError

TOKEN_SECONDS = 24 * 3600  # the runner's token; renewed at half its life


def client_modules():
    """The official client's modules (client, config, watch)."""
    try:
        from kubernetes import client, config, watch
    except ImportError:  # pragma: no cover - a dependency of the package
        raise UserError("the kubernetes backend needs the Python package `kubernetes` "
                        "(pip install kubernetes)") from None
    return client, config, watch


def connect(kubeconfig: Path | None = None, context: str | None = None):
    """An API client from a kubeconfig; a clear error when it cannot be loaded."""
    _, config, _ = client_modules()
    try:
        return config.new_client_from_config(
            config_file=str(kubeconfig) if kubeconfig else None, context=context)
    except (config.ConfigException, OSError, TypeError, ValueError) as exc:
        where = kubeconfig or "the default kubeconfig (~/.kube/config, $KUBECONFIG)"
        raise UserError(f"cannot load {where}"
                        + (f" context {context!r}" if context else "") + f": {exc}") from None


def api_message(exc: Any) -> str:
    try:
        return json.loads(exc.body).get("message", "")
    except (TypeError, ValueError, AttributeError):
        return str(exc.body or "")[:200]


class Api:
    """One cluster, one namespace: typed API objects and calls that fail clearly."""

    def __init__(self, kubeconfig: Path | None, context: str | None, namespace: str):
        self.admin = connect(kubeconfig, context)
        self.server = self.admin.configuration.host
        self.namespace = namespace
        self._runner = None  # the runner ServiceAccount's client, once it exists
        self._renew_at = 0.0

    # ---- clients -----------------------------------------------------------------------
    def core(self, admin: bool = False):
        """CoreV1Api: as the runner ServiceAccount once it exists, unless `admin`."""
        client, _, _ = client_modules()
        if not admin and self._runner is not None:
            if time.monotonic() > self._renew_at:
                self._runner = self._runner_client()
            return client.CoreV1Api(self._runner)
        return client.CoreV1Api(self.admin)

    def apps(self):
        return client_modules()[0].AppsV1Api(self.admin)

    def rbac(self):
        return client_modules()[0].RbacAuthorizationV1Api(self.admin)

    def custom(self):
        return client_modules()[0].CustomObjectsApi(self.admin)

    @property
    def runner(self):
        """The runner ServiceAccount's API client, or None before it exists."""
        return self._runner

    def use_runner_token(self) -> None:
        """From now on act as the runner ServiceAccount inside the namespace."""
        self._runner = self._runner_client()

    def drop_runner_token(self) -> None:
        self._runner = None

    def _runner_client(self):
        """A client that authenticates as the runner ServiceAccount (a bound token)."""
        client, _, _ = client_modules()
        token = self.call("request a token for ServiceAccount " + m.RUNNER,
                          client.CoreV1Api(self.admin).create_namespaced_service_account_token,
                          m.RUNNER, self.namespace,
                          {"spec": {"expirationSeconds": TOKEN_SECONDS}})
        conf = client.Configuration()
        admin = self.admin.configuration
        conf.host, conf.verify_ssl, conf.ssl_ca_cert = admin.host, admin.verify_ssl, \
            admin.ssl_ca_cert
        conf.proxy, conf.assert_hostname = admin.proxy, admin.assert_hostname
        conf.api_key = {"authorization": token.status.token}
        conf.api_key_prefix = {"authorization": "Bearer"}
        self._renew_at = time.monotonic() + TOKEN_SECONDS / 2
        return client.ApiClient(conf)

    # ---- calls -------------------------------------------------------------------------
    def call(self, what: str, fn: Callable, *args, **kwargs):
        """One API call; its failure becomes a KubernetesError that says what was
        attempted (a conflict names the clean-up command)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, _request_timeout=30, **kwargs)
        except ApiException as exc:
            hint = (f" (left by an earlier run? `k8sdds cleanup --namespace {self.namespace}` "
                    "removes it)" if exc.status == 409 else "")
            raise KubernetesError(f"{what}: {exc.status} {exc.reason}: {api_message(exc)}"
                                  f"{hint}") from None
        except (HTTPError, OSError) as exc:
            raise KubernetesError(f"{what}: cannot reach the API server {self.server}: {exc}"
                                  ) from None

    def exists(self, read: Callable, *args) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            read(*args, _request_timeout=30)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise KubernetesError(f"read {args}: {exc.status} {exc.reason}") from None

    def delete(self, deleter: Callable, kind: str, name: str, **kwargs) -> None:
        """Delete one object of the namespace; one that is gone already is fine."""
        from kubernetes.client.exceptions import ApiException

        try:
            deleter(name, self.namespace, _request_timeout=30, **kwargs)
        except ApiException as exc:
            if exc.status != 404:
                raise KubernetesError(f"delete {kind} {name}: {exc.status} {exc.reason}"
                                      ) from None

    def pod(self, name: str) -> dict | None:
        """The pod as a dict (as watches serve it), or None when it cannot be read."""
        from kubernetes.client.exceptions import ApiException

        try:
            pod = self.core().read_namespaced_pod(name, self.namespace, _request_timeout=30)
        except ApiException:
            return None
        return self.admin.sanitize_for_serialization(pod)

    def pod_log(self, name: str, container: str) -> bytes | None:
        """What the pod's container printed, or None when it never started or is gone."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return self.core().read_namespaced_pod_log(
                name, self.namespace, container=container, _preload_content=False,
                _request_timeout=60).data
        except (ApiException, HTTPError, OSError):
            return None

    def serialize(self, obj: Any) -> Any:
        return self.admin.sanitize_for_serialization(obj)
