#include "common/security.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/grpc_util.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/learner.grpc.pb.h"
#include "proto/policy_learner.grpc.pb.h"
#include "proto/roles.pb.h"
#include "proto/telemetry.grpc.pb.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"
#include "testing/test_certificates.h"

namespace rl {
namespace {

using ::testing::HasSubstr;

// What the product promises, written out independently of AllowedRoles:
// the roles that may call each method of the five services.
const std::map<std::string, uint32_t>& ExpectedRoles() {
  static const auto* table = new std::map<std::string, uint32_t>{
      {"/rl.RunService/SubmitRun", kRoleUser | kRoleAdmin},
      {"/rl.RunService/GetRun", kRoleUser | kRoleAdmin},
      {"/rl.RunService/ListRuns", kRoleUser | kRoleAdmin},
      {"/rl.RunService/CancelRun", kRoleUser | kRoleAdmin},
      {"/rl.RunService/WatchRun", kRoleUser | kRoleAdmin},
      {"/rl.RunService/ListWorkers", kRoleUser | kRoleAdmin},
      {"/rl.RunService/SubmitSweep", kRoleUser | kRoleAdmin},
      {"/rl.RunService/GetSweep", kRoleUser | kRoleAdmin},
      {"/rl.RunService/ListSweeps", kRoleUser | kRoleAdmin},
      {"/rl.RunService/CancelSweep", kRoleUser | kRoleAdmin},
      {"/rl.RunService/AddSweepTrial", kRoleUser | kRoleAdmin},
      {"/rl.WorkerService/RegisterWorker", kRoleWorker | kRoleAdmin},
      {"/rl.WorkerService/Heartbeat", kRoleWorker | kRoleAdmin},
      {"/rl.WorkerService/ReportStatus", kRoleWorker | kRoleAdmin},
      {"/rl.LearnerService/StreamRollouts", kRoleWorker | kRoleAdmin},
      {"/rl.LearnerService/SubscribePolicy", kRoleWorker | kRoleAdmin},
      {"/rl.LearnerService/GetStatus", kRoleUser | kRoleWorker | kRoleAdmin},
      {"/rl.PolicyLearnerService/UpdatePolicy", kRoleWorker | kRoleAdmin},
      {"/rl.PolicyLearnerService/CheckpointPolicy", kRoleWorker | kRoleAdmin},
      {"/rl.TelemetryService/Ingest", kRoleWorker | kRoleAdmin},
      {"/rl.TelemetryService/Query", kRoleUser | kRoleAdmin},
      {"/rl.TelemetryService/ListSeries", kRoleUser | kRoleAdmin},
      {"/rl.TelemetryService/Watch", kRoleUser | kRoleAdmin},
  };
  return *table;
}

// Every method of every service in proto/ (the .proto files, a data
// dependency, named from the directory so that a new file's services count
// too), from their linked descriptors; each must carry its (rl.roles)
// option: a method added without one fails here.
std::vector<std::string> ServedMethods() {
  std::vector<std::string> methods;
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator("proto")) {
    if (entry.path().extension() == ".proto") {
      files.push_back("proto/" + entry.path().filename().string());
    }
  }
  EXPECT_GE(files.size(), 3u) << "the .proto files are not in the runfiles";
  for (const std::string& file : files) {
    const google::protobuf::FileDescriptor* descriptor =
        google::protobuf::DescriptorPool::generated_pool()->FindFileByName(
            file);
    EXPECT_NE(descriptor, nullptr)
        << file << " is not linked into this test: add its library to deps";
    if (descriptor == nullptr) continue;
    for (int s = 0; s < descriptor->service_count(); ++s) {
      const google::protobuf::ServiceDescriptor* service =
          descriptor->service(s);
      for (int i = 0; i < service->method_count(); ++i) {
        const google::protobuf::MethodDescriptor* method = service->method(i);
        EXPECT_TRUE(method->options().HasExtension(rl::roles))
            << method->full_name() << " (" << file
            << ") has no option (rl.roles): say who may call it";
        methods.push_back(
            absl::StrCat("/", service->full_name(), "/", method->name()));
      }
    }
  }
  return methods;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

const char kUserToken[] = "user-token-0123456789abcdef";
const char kWorkerToken[] = "worker-token-0123456789abcdef";
const char kAdminToken[] = "admin-token-0123456789abcdef";

// Certificates made with openssl: a CA, a server and a client certificate
// it signs, an expired server certificate, and a second CA with a client
// certificate of its own.
class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTestDir("security"));
    ASSERT_OK(MakeTestCertificates(*dir_));
    WriteText(Path("tokens"),
              absl::StrCat("# token role name\n", kUserToken, " user alice\n",
                           kWorkerToken, " worker worker-1\n", kAdminToken,
                           "\tadmin root  # the operator\n"));
    for (const auto& [name, token] :
         std::map<std::string, std::string>{{"user.token", kUserToken},
                                            {"worker.token", kWorkerToken},
                                            {"admin.token", kAdminToken},
                                            {"bogus.token", "not-a-token"}}) {
      WriteText(Path(name), token + "\n");
    }
  }

  static std::string Path(const std::string& name) {
    return absl::StrCat(*dir_, "/", name);
  }

  static std::shared_ptr<const Security> Load(const SecurityOptions& options) {
    absl::StatusOr<std::shared_ptr<const Security>> security =
        Security::Load(options);
    EXPECT_OK(security.status());
    return security.ok() ? *security : nullptr;
  }

  void Serve(const SecurityOptions& options) {
    ServerOptions server_options;
    server_options.security = Load(options);
    absl::StatusOr<RunningServer> server = StartServer(
        {&runs_, &workers_, &learner_, &policy_learner_, &telemetry_},
        server_options);
    ASSERT_OK(server.status());
    server_ = std::move(*server);
  }

  // Calls `method` with an empty request as a client with `options`.
  grpc::Status Call(const std::string& method, const SecurityOptions& options) {
    ChannelOptions channel_options;
    channel_options.security = Load(options);
    if (channel_options.security == nullptr) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "no security");
    }
    grpc::GenericStub stub(CreateChannel(
        absl::StrCat("127.0.0.1:", server_.port), channel_options));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    grpc::Slice empty(std::string(""));
    grpc::ByteBuffer request(&empty, 1);
    grpc::ByteBuffer response;
    grpc::Status status;
    absl::Notification done;
    stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                   [&](grpc::Status s) {
                     status = std::move(s);
                     done.Notify();
                   });
    done.WaitForNotification();
    return status;
  }

  static SecurityOptions Client(const std::string& token_file) {
    SecurityOptions options;
    if (!token_file.empty()) options.token_file = Path(token_file);
    return options;
  }

  static std::string* dir_;
  // The generated bases answer UNIMPLEMENTED: a call that gets that far
  // went through the door.
  RunService::Service runs_;
  WorkerService::Service workers_;
  LearnerService::Service learner_;
  PolicyLearnerService::Service policy_learner_;
  TelemetryService::Service telemetry_;
  RunningServer server_;
};

std::string* SecurityTest::dir_ = nullptr;

TEST_F(SecurityTest, TableCoversEveryServedMethod) {
  const std::vector<std::string> methods = ServedMethods();
  EXPECT_EQ(methods.size(), ExpectedRoles().size());
  for (const std::string& method : methods) {
    const auto it = ExpectedRoles().find(method);
    ASSERT_NE(it, ExpectedRoles().end()) << method << " has no expected rule";
    EXPECT_EQ(AllowedRoles(method), it->second) << method;
  }
  EXPECT_EQ(AllowedRoles("/rl.Unknown/Method"), kRoleAdmin);
  EXPECT_NE(AllowedRoles("/grpc.health.v1.Health/Check") & kAnonymous, 0u);
}

// Each role (and no token, and a token nobody issued) against each method,
// over gRPC's local credentials on loopback.
TEST_F(SecurityTest, EachRoleAgainstEachMethod) {
  SecurityOptions server;
  server.tokens_file = Path("tokens");
  Serve(server);
  struct Caller {
    std::string token_file;
    uint32_t role;  // 0: not authenticated
  };
  const std::vector<Caller> callers = {{"", 0},
                                       {"bogus.token", 0},
                                       {"user.token", kRoleUser},
                                       {"worker.token", kRoleWorker},
                                       {"admin.token", kRoleAdmin}};
  int checked = 0;
  for (const std::string& method : ServedMethods()) {
    for (const Caller& caller : callers) {
      const grpc::Status status = Call(method, Client(caller.token_file));
      grpc::StatusCode want = grpc::StatusCode::UNIMPLEMENTED;  // let in
      if (caller.role == 0) {
        want = grpc::StatusCode::UNAUTHENTICATED;
      } else if ((ExpectedRoles().at(method) & caller.role) == 0) {
        want = grpc::StatusCode::PERMISSION_DENIED;
      }
      EXPECT_EQ(status.error_code(), want)
          << method << " as "
          << (caller.token_file.empty() ? "no token" : caller.token_file)
          << ": " << status.error_message();
      if (want == grpc::StatusCode::PERMISSION_DENIED) {
        EXPECT_THAT(status.error_message(), HasSubstr(method));
        EXPECT_THAT(status.error_message(), HasSubstr("may not call"));
      }
      // The secret never comes back in an error.
      for (const char* secret : {kUserToken, kWorkerToken, kAdminToken}) {
        EXPECT_THAT(status.error_message(), ::testing::Not(HasSubstr(secret)));
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 23 * 5);
  // Health checks need no token (probes of Kubernetes and Slurm scripts).
  EXPECT_EQ(Call("/grpc.health.v1.Health/Check", Client("")).error_code(),
            grpc::StatusCode::OK);
  // Reflection: any authenticated caller, nobody else.
  const std::string reflection =
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  EXPECT_EQ(Call(reflection, Client("")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(Call(reflection, Client("user.token")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

// The caller, as each call's own handler sees it, and how many properties
// the connection's auth context holds when it does.
class IdentityEcho final : public RunService::CallbackService {
 public:
  explicit IdentityEcho(std::shared_ptr<const Security> security)
      : security_(std::move(security)) {}

  grpc::ServerUnaryReactor* GetRun(grpc::CallbackServerContext* context,
                                   const GetRunRequest* /*request*/,
                                   Run* response) override {
    Record(*context);
    response->set_owner(CallerIdentity(*context, *security_).name);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  // Writes the caller once, then holds the stream until it is cancelled.
  grpc::ServerWriteReactor<RunEvent>* WatchRun(
      grpc::CallbackServerContext* context,
      const WatchRunRequest* /*request*/) override {
    class Reactor final : public grpc::ServerWriteReactor<RunEvent> {
     public:
      explicit Reactor(std::string owner) {
        event_.mutable_run()->set_owner(std::move(owner));
        StartWrite(&event_);
      }
      void OnWriteDone(bool /*ok*/) override {}
      void OnCancel() override { Finish(grpc::Status::CANCELLED); }
      void OnDone() override { delete this; }

     private:
      RunEvent event_;
    };
    Record(*context);
    return new Reactor(CallerIdentity(*context, *security_).name);
  }

  int max_properties() {
    absl::MutexLock lock(&mu_);
    return max_properties_;
  }

 private:
  void Record(const grpc::CallbackServerContext& context) {
    int properties = 0;
    if (const auto auth = context.auth_context(); auth != nullptr) {
      for (auto it = auth->begin(); it != auth->end(); ++it) ++properties;
    }
    absl::MutexLock lock(&mu_);
    max_properties_ = std::max(max_properties_, properties);
  }

  const std::shared_ptr<const Security> security_;
  absl::Mutex mu_;
  int max_properties_ = 0;
};

// Many concurrent calls on one connection, each with its own token: every
// handler sees its own caller (not the connection's first), and nothing
// piles up on the connection's auth context (gRPC shares it between the
// calls of a connection: writing per-call identities there raced, grew
// without bound and kept the first caller's name).
TEST_F(SecurityTest, IdentityIsPerCallOnASharedConnection) {
  SecurityOptions server_security;
  server_security.tokens_file = Path("tokens");
  const std::shared_ptr<const Security> security = Load(server_security);
  IdentityEcho echo(security);
  ServerOptions server_options;
  server_options.security = security;
  ASSERT_OK_AND_ASSIGN(RunningServer server,
                       StartServer({&echo}, server_options));
  // One channel without a token: each call brings its own.
  ChannelOptions channel_options;
  channel_options.security = Load(SecurityOptions{});
  const auto channel =
      CreateChannel(absl::StrCat("127.0.0.1:", server.port), channel_options);
  auto stub = RunService::NewStub(channel);
  const std::vector<std::pair<std::string, std::string>> callers = {
      {kUserToken, "alice"}, {kAdminToken, "root"}};
  auto with_token = [](grpc::ClientContext* context, const std::string& token) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(30));
    context->AddMetadata("authorization", "Bearer " + token);
  };

  // One call as caller `c`: unary, or a stream opened, read once and
  // cancelled. The owner its handler saw ("" if the call failed).
  auto unary = [&](grpc::ClientContext* context) {
    rl::Run run;
    return stub->GetRun(context, GetRunRequest(), &run).ok() ? run.owner() : "";
  };
  auto stream = [&](grpc::ClientContext* context) {
    auto reader = stub->WatchRun(context, WatchRunRequest());
    RunEvent event;
    const bool read = reader->Read(&event);
    context->TryCancel();
    reader->Finish().IgnoreError();
    return read ? event.run().owner() : "";
  };
  std::atomic<int> wrong{0};
  for (int round = 0; round < 5; ++round) {
    std::vector<std::thread> threads;
    // 8 threads of unary calls, 2 of streams beside them.
    for (int t = 0; t < 10; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 25; ++i) {
          const auto& [token, name] = callers[(t + i) % callers.size()];
          grpc::ClientContext context;
          with_token(&context, token);
          if ((t < 8 ? unary(&context) : stream(&context)) != name) ++wrong;
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
  }
  EXPECT_EQ(wrong.load(), 0) << "calls that failed or saw another caller";
  // What the connection had from its handshake, not one per call (5 rounds
  // of 250 calls): the context stays the size it was.
  EXPECT_LT(echo.max_properties(), 16);
  server.server->Shutdown();
}

TEST_F(SecurityTest, WithoutTokenTableLoopbackIsOpen) {
  Serve(SecurityOptions{});
  EXPECT_EQ(Call("/rl.RunService/SubmitRun", Client("")).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(SecurityTest, MutualTlsWorkersNeedACertificateSignedByTheCa) {
  SecurityOptions server;
  server.tls_cert_file = Path("server.pem");
  server.tls_key_file = Path("server.key");
  server.tls_ca_file = Path("ca.pem");
  server.tokens_file = Path("tokens");
  Serve(server);

  SecurityOptions worker = Client("worker.token");
  worker.tls_ca_file = Path("ca.pem");
  worker.tls_cert_file = Path("client.pem");
  worker.tls_key_file = Path("client.key");
  EXPECT_EQ(Call("/rl.WorkerService/Heartbeat", worker).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  // The worker token without a client certificate is not enough.
  SecurityOptions no_cert = Client("worker.token");
  no_cert.tls_ca_file = Path("ca.pem");
  const grpc::Status refused = Call("/rl.WorkerService/Heartbeat", no_cert);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(refused.error_message(), HasSubstr("client certificate"));

  // Users need only their token over TLS.
  SecurityOptions user = Client("user.token");
  user.tls_ca_file = Path("ca.pem");
  EXPECT_EQ(Call("/rl.RunService/ListRuns", user).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  // And a missing token is still refused over TLS.
  SecurityOptions anonymous;
  anonymous.tls_ca_file = Path("ca.pem");
  EXPECT_EQ(Call("/rl.RunService/ListRuns", anonymous).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  // A client certificate from another CA: the handshake fails.
  SecurityOptions stranger = worker;
  stranger.tls_cert_file = Path("stranger.pem");
  stranger.tls_key_file = Path("stranger.key");
  EXPECT_EQ(Call("/rl.WorkerService/Heartbeat", stranger).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  // A client that trusts another CA does not talk to this server.
  SecurityOptions wrong_ca = Client("user.token");
  wrong_ca.tls_ca_file = Path("other_ca.pem");
  EXPECT_EQ(Call("/rl.RunService/ListRuns", wrong_ca).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  // Plaintext (local credentials) to a TLS server does not get through.
  EXPECT_EQ(Call("/rl.RunService/ListRuns", Client("user.token")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(SecurityTest, ExpiredServerCertificateIsRefusedByClients) {
  SecurityOptions server;
  server.tls_cert_file = Path("expired.pem");
  server.tls_key_file = Path("expired.key");
  server.tokens_file = Path("tokens");
  Serve(server);
  SecurityOptions user = Client("user.token");
  user.tls_ca_file = Path("ca.pem");
  EXPECT_EQ(Call("/rl.RunService/ListRuns", user).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(SecurityTest, PlaintextOffLoopbackNeedsInsecure) {
  ServerOptions options;
  options.address = "0.0.0.0:0";
  options.security = Load(SecurityOptions{});
  absl::StatusOr<RunningServer> refused = StartServer({&runs_}, options);
  EXPECT_THAT(refused.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("refusing to listen on 0.0.0.0:0")));
  SecurityOptions insecure;
  insecure.insecure = true;
  options.security = Load(insecure);
  EXPECT_OK(StartServer({&runs_}, options).status());
  // With TLS it may listen anywhere.
  SecurityOptions tls;
  tls.tls_cert_file = Path("server.pem");
  tls.tls_key_file = Path("server.key");
  options.security = Load(tls);
  EXPECT_OK(StartServer({&runs_}, options).status());
}

TEST_F(SecurityTest, BadFilesAreNamed) {
  SecurityOptions half;
  half.tls_cert_file = Path("server.pem");
  EXPECT_THAT(Security::Load(half).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--tls_cert and --tls_key go together")));
  SecurityOptions missing;
  missing.tls_ca_file = Path("nope.pem");
  EXPECT_THAT(Security::Load(missing).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--tls_ca: cannot read")));
  WriteText(Path("bad_role"), "0123456789abcdef0123 root alice\n");
  SecurityOptions bad_role;
  bad_role.tokens_file = Path("bad_role");
  EXPECT_THAT(Security::Load(bad_role).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bad_role:1: unknown role \"root\"")));
  WriteText(Path("short"), "\n# comment\nabc user alice\n");
  SecurityOptions short_token;
  short_token.tokens_file = Path("short");
  EXPECT_THAT(Security::Load(short_token).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("short:3: token of 3 characters")));
  WriteText(Path("two_tokens"), "a b\n");
  SecurityOptions two;
  two.token_file = Path("two_tokens");
  EXPECT_THAT(Security::Load(two).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("must hold one token")));
}

TEST(SecurityHelpersTest, Loopback) {
  for (const char* address :
       {"127.0.0.1:50051", "localhost:1", "[::1]:80", "127.8.9.1",
        "ipv4:127.0.0.1:5", "LOCALHOST:8080", "[0:0:0:0:0:0:0:1]:9"}) {
    EXPECT_TRUE(IsLoopbackAddress(address)) << address;
  }
  for (const char* address : {"0.0.0.0:50051", "[::]:1", "10.0.0.1:5",
                              "learner-0.svc:50052", "128.0.0.1:1",
                              // Names that only look like loopback (issue 46).
                              "127.attacker.example", "127.0.0.1.nip.io:80",
                              "127.0.0.1.", "127.1", "[::1.evil]:80"}) {
    EXPECT_FALSE(IsLoopbackAddress(address)) << address;
  }
}

TEST(SecurityHelpersTest, SecretFilesAndKeys) {
  const std::string path = MakeTestDir("secret") + "/token";
  WriteText(path, "old");
  chmod(path.c_str(), 0644);
  const std::string token = NewToken();
  EXPECT_EQ(token.size(), 64u);
  EXPECT_NE(token, NewToken());
  ASSERT_OK(WriteSecretFile(path, token));
  struct stat info;
  ASSERT_EQ(stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600);
  std::ifstream in(path);
  std::string read;
  in >> read;
  EXPECT_EQ(read, token);

  EXPECT_EQ(DeriveKey("k", "run/a"), DeriveKey("k", "run/a"));
  EXPECT_NE(DeriveKey("k", "run/a"), DeriveKey("k", "run/b"));
  EXPECT_NE(DeriveKey("k", "run/a"), DeriveKey("k2", "run/a"));
  // RFC 4231 test case 2.
  EXPECT_EQ(DeriveKey("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
}

}  // namespace
}  // namespace rl
