#include "tern/health.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/flags/flags.h"
#include "common/grpc_status.h"
#include "common/net/channel.h"
#include "common/net/tls_flags.h"
#include "common/process/exit_codes.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace tern {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

void AddHealthFlags(CLI::App* app, HealthOptions* options) {
  app->add_option("address", options->address,
                  "host:port of a tern ps or tern global server")
      ->required()
      ->check(flags::HostPort());
  flags::Flag(app, "service", &options->service,
              "the service to ask about (tern.v1.ParameterServer, "
              "tern.v1.GlobalServer); empty: the server as a whole");
  flags::Flag(app, "timeout", &options->timeout_s,
              "seconds to wait for the answer, connecting included")
      ->check(flags::FinitePositive());
  net::AddTlsFlags(app, &options->tls);
}

absl::Status CheckHealth(const HealthOptions& options) {
  const std::string what =
      options.service.empty()
          ? options.address
          : absl::StrCat(options.address, " (", options.service, ")");
  net::ChannelOptions channel_options;
  channel_options.security = net::SecurityFromFlags(options.tls);
  if (absl::Status status =
          net::ValidateTlsFlags(options.tls, net::TlsUse::kConnect);
      !status.ok()) {
    return status;
  }
  if (absl::Status status =
          net::CheckSecurity(channel_options.security, net::Side::kClient);
      !status.ok()) {
    return status;
  }
  auto health_client = Health::NewStub(
      net::CreateChannel(options.address, channel_options));
  grpc::ClientContext context;
  context.set_deadline(
      absl::ToChronoTime(absl::Now() + absl::Seconds(options.timeout_s)));
  HealthCheckRequest request;
  request.set_service(options.service);
  HealthCheckResponse response;
  const absl::Status status =
      FromGrpcStatus(health_client->Check(&context, request, &response));
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat(what, ": ", status.message()));
  }
  if (response.status() != HealthCheckResponse::SERVING) {
    return absl::UnavailableError(absl::StrCat(
        what, ": ",
        HealthCheckResponse::ServingStatus_Name(response.status())));
  }
  return absl::OkStatus();
}

int RunHealth(const HealthOptions& options) {
  const absl::Status status = CheckHealth(options);
  if (!status.ok()) {
    std::fprintf(stderr, "tern health: %s\n",
                 std::string(status.message()).c_str());
    return process::kExitUnhealthy;
  }
  std::printf("%s: SERVING\n", options.address.c_str());
  return process::kExitOk;
}

}  // namespace tern
