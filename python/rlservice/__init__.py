"""Python client of the training service's coordinator (RunService) and of
its telemetry service (TelemetryService)."""

from rlservice.client import (Client, ClientError, TERMINAL_STATES, read_run_file, state_name,
                              state_value)
from rlservice.security import Security, make_channel
from rlservice.telemetry import TelemetryClient

__all__ = ["Client", "ClientError", "TERMINAL_STATES", "read_run_file", "state_name",
           "state_value", "TelemetryClient", "Security", "make_channel"]
