"""The DeviceClasses NVIDIA's DRA driver chart installs (deployments/helm/.../templates/deviceclass-*.yaml, its
defaults: GPUs and compute domains enabled, the resource.k8s.io/v1 API, so `gpu.nvidia.com` carries
`extendedResourceName: nvidia.com/gpu`), put in place while a topology has DRA nodes and removed otherwise; and
what the nodes' drivers have published."""
from __future__ import annotations

import cluster

GPU_DRIVER = "gpu.nvidia.com"


def _cel(driver: str, condition: str) -> list:
    return [{"cel": {"expression": f"device.driver == '{driver}' && device.attributes['{driver}'].{condition}"}}]


CLASSES = [
    {"name": "gpu.nvidia.com", "spec": {"selectors": _cel(GPU_DRIVER, "type == 'gpu'"), "extendedResourceName": "nvidia.com/gpu"}},
    {"name": "mig.nvidia.com", "spec": {"selectors": _cel(GPU_DRIVER, "type == 'mig'")}},
    {"name": "vfio.gpu.nvidia.com", "spec": {"selectors": _cel(GPU_DRIVER, "type == 'vfio'")}},
    {"name": "compute-domain-daemon.nvidia.com",
     "spec": {"selectors": _cel("compute-domain.nvidia.com", "type == 'daemon'")}},
    {"name": "compute-domain-default-channel.nvidia.com",
     "spec": {"selectors": _cel("compute-domain.nvidia.com",
                                "type == 'channel' && device.attributes['compute-domain.nvidia.com'].id == 0")}},
]


def _api(sim: cluster.SimDir):
    # The generic API: the oldest kubernetes client the collection supports (24.2) has no ResourceV1Api.
    from kubernetes import client, config  # pylint: disable=import-outside-toplevel  # the venv's
    return client.CustomObjectsApi(config.new_client_from_config(config_file=str(sim.kubeconfig)))


GROUP, VERSION = "resource.k8s.io", "v1"


def install(sim: cluster.SimDir, wanted: bool) -> None:
    """Create the chart's DeviceClasses when the topology has DRA nodes; remove them when it has none."""
    from kubernetes.client.rest import ApiException  # pylint: disable=import-outside-toplevel
    resource = _api(sim)
    for device_class in CLASSES:
        try:
            if wanted:
                resource.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", {
                    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": device_class["name"]},
                    "spec": device_class["spec"]})
            else:
                resource.delete_cluster_custom_object(GROUP, VERSION, "deviceclasses", device_class["name"])
        except ApiException as error:
            if error.status not in (404, 409):
                raise


def published_devices(sim: cluster.SimDir) -> dict:
    """{node: devices of driver gpu.nvidia.com in its ResourceSlices}."""
    found: dict = {}
    for item in _api(sim).list_cluster_custom_object(GROUP, VERSION, "resourceslices")["items"]:
        spec = item["spec"]
        if spec.get("driver") == GPU_DRIVER and spec.get("nodeName"):
            found[spec["nodeName"]] = found.get(spec["nodeName"], 0) + len(spec.get("devices") or [])
    return found
