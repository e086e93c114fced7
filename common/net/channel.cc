#include "common/net/channel.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_format.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"

namespace tern::net {
namespace {

int Milliseconds(absl::Duration duration) {
  return static_cast<int>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(duration), 1, int64_t{1} << 30));
}

// A duration as the service config's JSON wants it: decimal seconds and an
// "s" ("0.050s").
std::string JsonDuration(absl::Duration duration) {
  return absl::StrFormat("%.3fs", absl::ToDoubleSeconds(duration));
}

}  // namespace

std::string RetryServiceConfig(const RetryPolicy& policy) {
  // "name": [{}] matches every method of every service.
  return absl::StrFormat(
      R"({"methodConfig": [{"name": [{}], "retryPolicy": {)"
      R"("maxAttempts": %d, "initialBackoff": "%s", "maxBackoff": "%s", )"
      R"("backoffMultiplier": %g, "retryableStatusCodes": ["UNAVAILABLE"]}}]})",
      std::clamp(policy.max_attempts, 2, 5),
      JsonDuration(policy.initial_backoff), JsonDuration(policy.max_backoff),
      policy.backoff_multiplier);
}

grpc::ChannelArguments ChannelArgumentsFor(const ChannelOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, Milliseconds(options.keepalive.time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              Milliseconds(options.keepalive.timeout));
  // Pings only while calls are in flight, but as many as those calls need
  // (a barrier may hold a call for minutes without data).
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  if (options.security.kind == TransportSecurity::Kind::kTls &&
      !options.security.server_name.empty()) {
    args.SetSslTargetNameOverride(options.security.server_name);
  }
  if (options.retry.enabled && options.retry.max_attempts > 1) {
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 1);
    args.SetServiceConfigJSON(RetryServiceConfig(options.retry));
    // A request is retried only while gRPC still holds all of it (256 KiB
    // by default): let it hold the largest request we send.
    args.SetInt(GRPC_ARG_PER_RPC_RETRY_BUFFER_SIZE,
                std::max(options.max_message_bytes, 256 << 10));
  } else {
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  }
  return args;
}

std::shared_ptr<grpc::Channel> CreateChannel(const std::string& address,
                                             const ChannelOptions& options) {
  return grpc::CreateCustomChannel(address,
                                   ChannelCredentials(options.security),
                                   ChannelArgumentsFor(options));
}

}  // namespace tern::net
