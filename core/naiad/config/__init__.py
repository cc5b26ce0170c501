"""Model configuration: parse, normalise, validate and render ``inference.ModelConfig``.

Typical load sequence::

    config = read_model_config(model_dir)
    detect_backend(config, model_dir)
    fill_defaults(config, gpu_count=n)
    validate_config(config, gpu_count=n, model_dir_name=model_dir.name)
    versions, warnings = select_versions(config.version_policy, list_version_dirs(model_dir))
"""

from naiad.config.normalize import detect_backend, fill_defaults, fill_load_defaults
from naiad.config.parsing import config_from_json, config_path, parse_model_config, read_model_config
from naiad.config.rendering import config_to_json, config_to_json_dict
from naiad.config.validate import validate_config
from naiad.config.versions import list_version_dirs, select_versions
from naiad.protocol.model_config_pb2 import ModelConfig

__all__ = [
    "ModelConfig",
    "config_from_json",
    "config_path",
    "config_to_json",
    "config_to_json_dict",
    "detect_backend",
    "fill_defaults",
    "fill_load_defaults",
    "list_version_dirs",
    "parse_model_config",
    "read_model_config",
    "select_versions",
    "validate_config",
]
