#include "common/refusal_log.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tern {
namespace {

// A key's peer or reason is cut to this many characters, so that no
// caller-chosen text makes a tracked key large.
constexpr size_t kMaxKeyChars = 128;

std::string Cut(absl::string_view text) {
  return std::string(text.substr(0, kMaxKeyChars));
}

}  // namespace

std::string RefusalReason(absl::string_view call, const absl::Status& status) {
  return absl::StrCat(call, " ", absl::StatusCodeToString(status.code()));
}

std::string MemberKey(absl::string_view kind, uint32_t id, uint32_t count) {
  return id < count ? absl::StrCat(kind, " ", id)
                    : absl::StrCat("an unknown ", kind);
}

std::string PeerHost(absl::string_view grpc_peer) {
  const bool ipv4 = absl::StartsWith(grpc_peer, "ipv4:");
  const bool ipv6 = absl::StartsWith(grpc_peer, "ipv6:");
  const size_t colon = grpc_peer.rfind(':');
  if (!(ipv4 || ipv6) || colon == absl::string_view::npos) {
    return std::string(grpc_peer);
  }
  const absl::string_view port = grpc_peer.substr(colon + 1);
  const absl::string_view host = grpc_peer.substr(0, colon);
  const bool numeric_port =
      !port.empty() && std::all_of(port.begin(), port.end(), absl::ascii_isdigit);
  // An IPv6 address has colons of its own: its port follows the bracket
  // ("[::1]:40000", or percent-encoded "%5B::1%5D:40000").
  const bool port_follows_host =
      ipv4 || absl::EndsWith(host, "]") || absl::EndsWithIgnoreCase(host, "%5D");
  if (!numeric_port || !port_follows_host || host.size() <= 5) {
    return std::string(grpc_peer);
  }
  return std::string(host);
}

RefusalLog::RefusalLog(Logger logger, RefusalLogOptions options)
    : logger_(logger != nullptr ? std::move(logger) : MakeNullLogger()),
      options_(std::move(options)),
      interval_start_(options_.clock()) {}

RefusalLog::RefusalLog(Logger logger, std::function<absl::Time()> clock)
    : RefusalLog(std::move(logger), [&clock] {
        RefusalLogOptions options;
        options.clock = std::move(clock);
        return options;
      }()) {}

RefusalLog::~RefusalLog() {
  std::vector<std::string> lines;
  {
    absl::MutexLock lock(&mu_);
    lines = Summaries("before shutdown");
  }
  LogAll(lines);
}

bool RefusalLog::Pass(absl::string_view peer, absl::string_view reason) {
  std::vector<std::string> summaries;
  bool pass = false;
  {
    absl::MutexLock lock(&mu_);
    summaries = TurnOver(options_.clock());
    Key key(Cut(peer), Cut(reason));
    auto it = counts_.find(key);
    if (it == counts_.end() && counts_.size() < options_.max_keys) {
      it = counts_.emplace(std::move(key), Count{}).first;
    }
    Count& count = it != counts_.end() ? it->second : others_;
    pass = count.logged < options_.lines_per_key;
    if (pass) {
      ++count.logged;
    } else {
      ++count.suppressed;
    }
  }
  LogAll(summaries);
  return pass;
}

void RefusalLog::Flush() {
  std::vector<std::string> summaries;
  {
    absl::MutexLock lock(&mu_);
    summaries = TurnOver(options_.clock());
  }
  LogAll(summaries);
}

std::vector<std::string> RefusalLog::TurnOver(absl::Time now) {
  const absl::Duration elapsed = now - interval_start_;
  if (elapsed < options_.interval) return {};
  const int64_t seconds =
      absl::ToInt64Seconds(absl::Ceil(elapsed, absl::Seconds(1)));
  std::vector<std::string> lines =
      Summaries(absl::StrCat("in the last ", seconds, " s"));
  counts_.clear();
  others_ = Count{};
  interval_start_ = now;
  return lines;
}

std::vector<std::string> RefusalLog::Summaries(absl::string_view span) const {
  // In key order: flat_hash_map's order differs from run to run.
  std::vector<const std::pair<const Key, Count>*> entries;
  for (const auto& entry : counts_) {
    if (entry.second.suppressed > 0) entries.push_back(&entry);
  }
  std::sort(entries.begin(), entries.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  std::vector<std::string> lines;
  for (const auto* entry : entries) {
    const auto& [key, count] = *entry;
    lines.push_back(absl::StrCat(count.suppressed, " more refusals of ",
                                 key.second, " from ", key.first, " ", span,
                                 " were not logged"));
  }
  if (others_.suppressed > 0) {
    lines.push_back(absl::StrCat(
        others_.suppressed, " more refusals of further peers and reasons (",
        options_.max_keys, " are tracked) ", span, " were not logged"));
  }
  return lines;
}

void RefusalLog::LogAll(const std::vector<std::string>& lines) const {
  for (const std::string& line : lines) logger_->warn("{}", line);
}

}  // namespace tern
