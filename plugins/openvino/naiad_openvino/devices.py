"""Which OpenVINO device an instance compiles for.

``TARGET_DEVICE`` (a Triton openvino parameter) wins when set: ``CPU``, ``GPU``, ``GPU.1``,
``AUTO``, ``MULTI:...``, ... as OpenVINO spells devices. Otherwise a KIND_GPU instance
uses OpenVINO's ``GPU`` device (``GPU.<device_id>`` when OpenVINO lists several) and every
other kind uses ``CPU``. OpenVINO's GPU plugin drives Intel GPUs only.
"""

from __future__ import annotations

import logging
from typing import Any

from naiad.backend import unavailable

logger = logging.getLogger("naiad.openvino")


def choose_device(core: Any, kind: str, device_id: int, target: str | None, model_name: str, instance: str) -> str:
    """The OpenVINO device name for one instance; UNAVAILABLE when no such device exists."""
    if target:
        return target
    if kind != "GPU":
        return "CPU"
    available = [str(device) for device in core.available_devices]
    gpus = [device for device in available if device == "GPU" or device.startswith("GPU.")]
    if not gpus:
        raise unavailable(
            f"model '{model_name}', instance '{instance}': KIND_GPU needs an OpenVINO GPU device (an Intel GPU), "
            f"but OpenVINO finds only {', '.join(available) or 'no devices'} on this host; use "
            "instance_group [ { kind: KIND_CPU } ]"
        )
    if gpus == ["GPU"]:
        if device_id != 0:
            raise unavailable(
                f"model '{model_name}', instance '{instance}': OpenVINO has one GPU device, GPU.0; "
                f"there is no GPU.{device_id}"
            )
        return "GPU"
    wanted = f"GPU.{device_id}"
    if wanted not in gpus:
        raise unavailable(
            f"model '{model_name}', instance '{instance}': OpenVINO has no device {wanted} (it has {', '.join(gpus)})"
        )
    return wanted


def supported_properties(core: Any, device: str, wanted: dict[str, str], model_name: str) -> dict[str, str]:
    """The ``wanted`` properties ``device`` supports; the others are dropped with a warning.

    For instance the CPU plugin has no ``COMPILATION_NUM_THREADS``. When OpenVINO cannot say
    what a device supports (meta devices), every property is passed through.
    """
    if not wanted:
        return {}
    try:
        supported = set(core.get_property(device, "SUPPORTED_PROPERTIES"))
    except Exception:
        return dict(wanted)
    kept = {key: value for key, value in wanted.items() if key in supported}
    for key in wanted.keys() - kept.keys():
        logger.warning(
            "model '%s': OpenVINO device %s does not support %s; that parameter is ignored", model_name, device, key
        )
    return kept
