"""Python client of the training service's coordinator (RunService) and of
its telemetry service (TelemetryService), and trained policies out of it
(load_policy)."""

from rlservice.client import (Client, ClientError, TERMINAL_STATES, read_run_file,
                              read_sweep_file, state_name, state_value)
from rlservice.policy import Policy, export_policy, load_policy
from rlservice.security import Security, make_channel
from rlservice.telemetry import TelemetryClient

__all__ = ["Client", "ClientError", "TERMINAL_STATES", "read_run_file", "read_sweep_file",
           "state_name", "state_value", "TelemetryClient", "Security", "make_channel", "Policy",
           "export_policy", "load_policy"]
