"""The generated stubs: installed as rlservice.proto (tools/setup.sh), or the
`proto` package that Bazel generates when running from the source tree."""

try:
    from rlservice.proto import (common_pb2, coordinator_pb2, coordinator_pb2_grpc,
                                 telemetry_pb2, telemetry_pb2_grpc)
except ImportError:  # Under Bazel: //proto:*_py.
    from proto import (common_pb2, coordinator_pb2, coordinator_pb2_grpc,
                       telemetry_pb2, telemetry_pb2_grpc)

__all__ = ["common_pb2", "coordinator_pb2", "coordinator_pb2_grpc",
           "telemetry_pb2", "telemetry_pb2_grpc"]
