"""Waiting on pods with watches (never sleeps), bounded in time; a pod that cannot get where
it must fails with its own account of why."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from k8sdds.deployment.kubernetes import pods
from k8sdds.deployment.kubernetes.api import Api
from k8sdds.errors import KubernetesError


class Expired(Exception):
    """The time ran out (where the caller asked for this instead of an error)."""


def until(api: Api, selector: str, names: Collection[str], done: Callable[[dict], bool],
          timeout: float, goal: str, expire_ok: bool = False) -> None:
    """Watch the pods of `selector` until `done` holds for every one of `names`. A pod that
    cannot get there raises KubernetesError with its reason; running out of time raises it
    too (or Expired with `expire_ok`)."""
    from kubernetes import watch
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    waiting = set(names)
    if not waiting:
        return
    core = api.core()
    deadline = time.monotonic() + timeout
    last: dict[str, dict] = {}
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        w = watch.Watch()
        try:
            for event in w.stream(core.list_namespaced_pod, api.namespace,
                                  label_selector=selector,
                                  timeout_seconds=max(1, int(left + 0.999)),
                                  _request_timeout=left + 10):
                pod = event["raw_object"]
                name = pod["metadata"]["name"]
                if name in waiting:
                    last[name] = pod
                    _judge(event["type"], pod, done, waiting, goal)
                if not waiting or time.monotonic() >= deadline:
                    break
        except ApiException as exc:
            raise KubernetesError(f"watch pods: {exc.status} {exc.reason}") from None
        except HTTPError:
            continue  # the watch's connection timed out: watch again while time is left
        finally:
            w.stop()
    if waiting:
        if expire_ok:
            raise Expired()
        name = sorted(waiting)[0]
        raise KubernetesError(f"pod {name} was not {goal} within {timeout:g} s: "
                              f"{why(api, name, last.get(name))}")


def _judge(kind: str, pod: dict, done: Callable[[dict], bool], waiting: set[str],
           goal: str) -> None:
    """One event: the pod got there, will never get there, or may still."""
    name = pod["metadata"]["name"]
    if kind == "DELETED":
        raise KubernetesError(f"pod {name} was deleted before it was {goal}")
    if done(pod):
        waiting.discard(name)
        return
    reason = pods.fatal(pod)
    if reason:
        raise KubernetesError(f"pod {name} on node {pod['spec'].get('nodeName')}: {reason}")


def why(api: Api, name: str, pod: dict | None) -> str:
    """The pod's own account of itself: status, conditions, then its latest events."""
    from kubernetes.client.exceptions import ApiException

    reasons = pods.status_reasons(pod)
    try:
        events = api.core().list_namespaced_event(
            api.namespace, field_selector=f"involvedObject.name={name}",
            _request_timeout=30).items
    except ApiException:
        events = []
    for ev in sorted(events, key=lambda e: str(e.last_timestamp or e.event_time or ""))[-2:]:
        reasons.append(f"event {ev.reason}: {ev.message}")
    if not pod or not (pod.get("status") or {}).get("phase"):
        reasons.append("no kubelet has taken it (is the node's kubelet running?)")
    return "; ".join(reasons) or "no status"


def gone(core, namespace: str, selector: str, timeout: float) -> bool:
    """Wait (watching) until no pod matches `selector`; False after `timeout` s."""
    from kubernetes import watch

    listed = core.list_namespaced_pod(namespace, label_selector=selector, _request_timeout=30)
    left = {p.metadata.name for p in listed.items}
    if not left:
        return True
    w = watch.Watch()
    try:
        for event in w.stream(core.list_namespaced_pod, namespace, label_selector=selector,
                              resource_version=listed.metadata.resource_version,
                              timeout_seconds=max(1, int(timeout)),
                              _request_timeout=timeout + 10):
            if event["type"] == "DELETED":
                left.discard(event["raw_object"]["metadata"]["name"])
                if not left:
                    return True
    except Exception:  # noqa: BLE001 - the final list decides
        pass
    finally:
        w.stop()
    return not core.list_namespaced_pod(namespace, label_selector=selector,
                                        _request_timeout=30).items
