"""Python client of the training service's coordinator (RunService) and of
its telemetry service (TelemetryService)."""

from rlservice.client import Client, ClientError, load_run_file, TERMINAL_STATES
from rlservice.security import Security, make_channel
from rlservice.telemetry import TelemetryClient

__all__ = ["Client", "ClientError", "load_run_file", "TERMINAL_STATES", "TelemetryClient",
           "Security", "make_channel"]
