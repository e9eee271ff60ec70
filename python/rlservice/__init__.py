"""Python client of the training service's coordinator (RunService)."""

from rlservice.client import Client, ClientError, load_run_file, TERMINAL_STATES

__all__ = ["Client", "ClientError", "load_run_file", "TERMINAL_STATES"]
