"""Configuration: the schema (frozen value objects) and reading YAML or a mapping into it, once, at
the edge (`load_config`, `config_from_dict`). Import it from here: `from batchgate.config import ...`.
A job's own options are read here too (`job_spec`: `JobSpec`, `parse_job_spec`), by the one parser
every front door uses.

May import: `batchgate.errors`, `batchgate.models` (the route modes), `batchgate.endpoints` (the
most inputs an embeddings body may carry) and the policy value objects it holds
(`batchgate.policy`, `batchgate.quota.limits`, `batchgate.quota.store.location`). Nothing
else of batchgate; everything else may import this.
"""

from batchgate.config.job_spec import JobSpec, parse_job_spec
from batchgate.config.load import config_from_dict, load_config
from batchgate.config.network import NetworkSettings, ProxyURL
from batchgate.config.schema import (
    EMULATOR_BASE_URL,
    Budget,
    GatewayConfig,
    JobSettings,
    ModelLimits,
    Price,
    ProviderConfig,
    ProviderKind,
    QuotaSettings,
    RouteConfig,
    RouteTarget,
    Secret,
    Settings,
    TimeoutConfig,
)
from batchgate.models import ROUTE_MODES, RouteMode

__all__ = [
    "EMULATOR_BASE_URL",
    "ROUTE_MODES",
    "Budget",
    "GatewayConfig",
    "JobSettings",
    "JobSpec",
    "ModelLimits",
    "NetworkSettings",
    "Price",
    "ProviderConfig",
    "ProviderKind",
    "ProxyURL",
    "QuotaSettings",
    "RouteConfig",
    "RouteMode",
    "RouteTarget",
    "Secret",
    "Settings",
    "TimeoutConfig",
    "config_from_dict",
    "load_config",
    "parse_job_spec",
]
