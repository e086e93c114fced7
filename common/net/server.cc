#include "common/net/server.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/flags/flag_checks.h"
#include "common/net/plaintext.h"
#include "common/net/tls_flags.h"
#include "grpc/grpc.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/server_builder.h"

namespace tern::net {
namespace {

int Milliseconds(absl::Duration duration) {
  return static_cast<int>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(duration), 1, int64_t{1} << 30));
}

// The bounds of ServerOptions on what a peer can make the server hold.
void AddPeerLimits(const ServerOptions& options, grpc::ServerBuilder* builder) {
  grpc::ResourceQuota quota("tern-server");
  quota.Resize(static_cast<size_t>(TransportBytes(options)));
  builder->SetResourceQuota(quota);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                              options.max_concurrent_streams);
  builder->AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                              Milliseconds(options.handshake_timeout));
}

}  // namespace

int64_t TransportBytes(const ServerOptions& options) {
  const int64_t senders = std::max(options.senders, 1);
  return (senders + 2) * int64_t{options.max_message_bytes} +
         (int64_t{64} << 20);
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(
    const ServerOptions& options, const std::vector<ServiceEntry>& services) {
  if (absl::Status status =
          CheckPlaintext(options.security, options.listen, "listen on");
      !status.ok()) {
    return status;
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ServerCredentials(options.security);
  if (!credentials.ok()) return credentials.status();
  std::unique_ptr<Server> server(new Server());
  grpc::ServerBuilder builder;
  absl::StatusOr<std::unique_ptr<Acceptor>> acceptor =
      server->Listen(options, *credentials, &builder);
  if (!acceptor.ok()) return acceptor.status();
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  builder.SetMaxSendMessageSize(options.max_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             Milliseconds(options.keepalive.time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             Milliseconds(options.keepalive.timeout));
  // Accept the clients' keepalive pings during long calls (a barrier holds
  // a call for minutes without data); by default gRPC answers a ping more
  // often than every 5 minutes with GOAWAY.
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      Milliseconds(options.keepalive.time / 2));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Two servers on one port would split the clients between them: the
  // second must fail to bind, not share the port (gRPC sets SO_REUSEPORT
  // by default).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  AddPeerLimits(options, &builder);
  for (const ServiceEntry& entry : services) {
    builder.RegisterService(entry.service);
  }
  builder.RegisterService(&server->health_);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    server->server_.reset();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options.listen, " (is the port in use?)"));
  }
  if (server->gate_ != nullptr) server->gate_->Start(*std::move(acceptor));
  server->health_.SetServing("", true);
  for (const ServiceEntry& entry : services) {
    server->health_.SetServing(entry.name, true);
  }
  return server;
}

absl::StatusOr<std::unique_ptr<Server>> StartLogged(
    const ServerOptions& options, const std::vector<ServiceEntry>& services) {
  absl::StatusOr<std::unique_ptr<Server>> server =
      Server::Start(options, services);
  if (options.logger == nullptr) return server;
  if (!server.ok()) {
    options.logger->error("{}", std::string(server.status().message()));
  } else if (const std::string warning = PlaintextWarning(
                 options.security, options.listen, "listening on");
             !warning.empty()) {
    options.logger->warn("{}", warning);
  }
  return server;
}

ServerOptions ServerOptionsFromFlags(const std::string& listen,
                                     const TlsFiles& tls, bool insecure,
                                     uint32_t max_message_mb, int senders,
                                     Logger logger) {
  ServerOptions options;
  options.listen = listen;
  options.security = SecurityFromFlags(tls, insecure);
  options.max_message_bytes = flags::MessageBytes(max_message_mb);
  options.senders = senders;
  options.logger = std::move(logger);
  return options;
}

absl::StatusOr<std::unique_ptr<Server::Acceptor>> Server::Listen(
    const ServerOptions& options,
    const std::shared_ptr<grpc::ServerCredentials>& credentials,
    grpc::ServerBuilder* builder) {
  if (absl::StartsWith(options.listen, "unix:")) {
    builder->AddListeningPort(options.listen, credentials, &port_);
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<ConnectionGate>> gate = ConnectionGate::Listen(
      options.listen, ConnectionLimitsFor(options.senders), options.logger);
  if (!gate.ok()) return gate.status();
  gate_ = *std::move(gate);
  port_ = gate_->port();
  return builder->experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
      credentials);
}

Server::~Server() { Shutdown(absl::ZeroDuration()); }

void Server::Shutdown(absl::Duration grace) {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  if (gate_ != nullptr) gate_->Stop();
  health_.Shutdown();
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
}

}  // namespace tern::net
