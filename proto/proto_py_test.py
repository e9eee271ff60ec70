"""The generated Python stubs import and match the C++ contract."""
import json
import struct
import unittest

from google.protobuf import descriptor_pb2
from google.protobuf import json_format

from proto import common_pb2
from proto import coordinator_pb2
from proto import coordinator_pb2_grpc
from proto import learner_pb2
from proto import learner_pb2_grpc
from proto import policy_learner_pb2
from proto import policy_learner_pb2_grpc
from proto import telemetry_pb2_grpc


class GeneratedStubsTest(unittest.TestCase):

    def test_run_spec_json_mapping(self):
        spec = json_format.Parse(
            json.dumps({"env": {"id": "CartPole-v1"}, "envsPerActor": 8,
                        "ppo": {"entropyCoef": 0.0}, "syncMode": "ASYNC"}),
            common_pb2.RunSpec())
        self.assertEqual(spec.env.id, "CartPole-v1")
        self.assertEqual(spec.envs_per_actor, 8)
        self.assertTrue(spec.ppo.HasField("entropy_coef"))
        self.assertEqual(spec.sync_mode, common_pb2.ASYNC)
        with self.assertRaises(json_format.ParseError):
            json_format.Parse('{"envsPerActr": 8}', common_pb2.RunSpec())

    def test_tensor_bytes_are_little_endian(self):
        t = common_pb2.Tensor(dtype=common_pb2.DTYPE_INT32, shape=[2],
                              data=struct.pack("<2i", 1, 258))
        parsed = common_pb2.Tensor.FromString(t.SerializeToString())
        self.assertEqual(struct.unpack("<2i", parsed.data), (1, 258))

    def test_services_have_their_methods(self):
        run_service = coordinator_pb2.DESCRIPTOR.services_by_name["RunService"]
        self.assertEqual(
            sorted(m.name for m in run_service.methods),
            ["AddSweepTrial", "CancelRun", "CancelSweep", "GetRun",
             "GetSweep", "ListRuns", "ListSweeps", "ListWorkers", "SubmitRun",
             "SubmitSweep", "WatchRun"])
        learner = learner_pb2.DESCRIPTOR.services_by_name["LearnerService"]
        stream = learner.methods_by_name["StreamRollouts"]
        method = descriptor_pb2.MethodDescriptorProto()
        stream.CopyToProto(method)
        self.assertTrue(method.client_streaming and method.server_streaming)
        self.assertTrue(hasattr(coordinator_pb2_grpc, "RunServiceStub"))
        self.assertTrue(hasattr(learner_pb2_grpc, "LearnerServiceStub"))
        self.assertTrue(hasattr(telemetry_pb2_grpc, "TelemetryServiceStub"))
        # A run's learner calls the learners of its other policies.
        policy = policy_learner_pb2.DESCRIPTOR.services_by_name["PolicyLearnerService"]
        self.assertEqual(sorted(m.name for m in policy.methods),
                         ["CheckpointPolicy", "UpdatePolicy"])
        self.assertTrue(hasattr(policy_learner_pb2_grpc, "PolicyLearnerServiceStub"))
        self.assertIn("learner_per_policy",
                      common_pb2.Resources.DESCRIPTOR.fields_by_name)


if __name__ == "__main__":
    unittest.main()
