#include "common/refusal_log.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/captured_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::ElementsAre;

// A logger that keeps its lines, and a clock the test moves.
class RefusalLogTest : public ::testing::Test {
 protected:
  RefusalLogOptions Options() {
    RefusalLogOptions options;
    options.clock = [this] { return now_; };
    return options;
  }
  std::vector<std::string> Lines() const { return log_.Lines(); }
  void Refuse(RefusalLog& log, absl::string_view peer,
              absl::string_view reason, int times) {
    for (int i = 0; i < times; ++i) {
      log.Warn(peer, reason, "{} refused: call {}", std::string(peer), i);
    }
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  CapturedLog log_;
  const Logger& logger_ = log_.logger();
};

TEST_F(RefusalLogTest, TheFirstLinesPassThenTheRestAreCounted) {
  RefusalLog log(logger_, Options());
  Refuse(log, "worker 3", "push FAILED_PRECONDITION", 1000);
  EXPECT_THAT(Lines(), ElementsAre("worker 3 refused: call 0",
                                   "worker 3 refused: call 1",
                                   "worker 3 refused: call 2",
                                   "worker 3 refused: call 3",
                                   "worker 3 refused: call 4"));
}

TEST_F(RefusalLogTest, TheSummaryCountsWhatWasNotLogged) {
  RefusalLog log(logger_, Options());
  Refuse(log, "worker 3", "push FAILED_PRECONDITION", 1000);
  now_ += absl::Seconds(59);
  log.Flush();  // the interval has not passed
  EXPECT_EQ(Lines().size(), 5u);
  now_ += absl::Seconds(1);
  log.Flush();
  ASSERT_EQ(Lines().size(), 6u);
  EXPECT_EQ(Lines().back(),
            "995 more refusals of push FAILED_PRECONDITION from worker 3 in "
            "the last 60 s were not logged");
  // The next interval starts afresh: five lines again, no summary yet.
  Refuse(log, "worker 3", "push FAILED_PRECONDITION", 7);
  EXPECT_EQ(Lines().size(), 11u);
  now_ += absl::Seconds(90);
  log.Flush();
  ASSERT_EQ(Lines().size(), 12u);
  EXPECT_EQ(Lines().back(),
            "2 more refusals of push FAILED_PRECONDITION from worker 3 in "
            "the last 90 s were not logged");
}

TEST_F(RefusalLogTest, TheNextRefusalAfterTheIntervalLogsTheSummaryFirst) {
  RefusalLog log(logger_, Options());
  Refuse(log, "ipv4:10.0.0.7", "Join INVALID_ARGUMENT", 6);
  now_ += absl::Seconds(61);
  Refuse(log, "ipv4:10.0.0.7", "Join INVALID_ARGUMENT", 1);
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_EQ(lines[5],
            "1 more refusals of Join INVALID_ARGUMENT from ipv4:10.0.0.7 in "
            "the last 61 s were not logged");
  EXPECT_EQ(lines[6], "ipv4:10.0.0.7 refused: call 0");
}

TEST_F(RefusalLogTest, NoSummaryWhenNothingWasSuppressed) {
  RefusalLog log(logger_, Options());
  Refuse(log, "worker 1", "push INVALID_ARGUMENT", 5);
  now_ += absl::Minutes(5);
  log.Flush();
  EXPECT_EQ(Lines().size(), 5u);
}

TEST_F(RefusalLogTest, KeysAreIndependent) {
  RefusalLog log(logger_, Options());
  // Another peer, or another reason of the same peer, has its own lines.
  Refuse(log, "worker 1", "push FAILED_PRECONDITION", 20);
  Refuse(log, "worker 2", "push FAILED_PRECONDITION", 20);
  Refuse(log, "worker 1", "join INVALID_ARGUMENT", 20);
  EXPECT_EQ(Lines().size(), 15u);
  now_ += absl::Seconds(60);
  log.Flush();
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 18u);
  EXPECT_THAT(
      std::vector<std::string>(lines.begin() + 15, lines.end()),
      ElementsAre("15 more refusals of join INVALID_ARGUMENT from worker 1 in "
                  "the last 60 s were not logged",
                  "15 more refusals of push FAILED_PRECONDITION from worker 1 "
                  "in the last 60 s were not logged",
                  "15 more refusals of push FAILED_PRECONDITION from worker 2 "
                  "in the last 60 s were not logged"));
}

TEST_F(RefusalLogTest, KeysBeyondTheCapShareOneCount) {
  RefusalLogOptions options = Options();
  options.max_keys = 4;
  options.lines_per_key = 2;
  RefusalLog log(logger_, options);
  // A stranger rotating ports or addresses: 1000 peers, 3 calls each.
  for (int peer = 0; peer < 1000; ++peer) {
    Refuse(log, absl::StrCat("ipv4:10.0.", peer / 256, ".", peer % 256),
           "PushPull PERMISSION_DENIED", 3);
  }
  // 4 tracked peers with 2 lines each, then 2 lines for all the others.
  EXPECT_EQ(Lines().size(), 4u * 2 + 2);
  now_ += absl::Seconds(60);
  log.Flush();
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 10u + 5);
  EXPECT_EQ(lines.back(),
            "2986 more refusals of further peers and reasons (4 are tracked) "
            "in the last 60 s were not logged");
  // 10 logged + 4 * 1 + 2986 = 3000 calls.
  EXPECT_EQ(lines[10],
            "1 more refusals of PushPull PERMISSION_DENIED from ipv4:10.0.0.0 "
            "in the last 60 s were not logged");
}

TEST_F(RefusalLogTest, TheCapIsPerIntervalAndForgottenKeysStartAfresh) {
  RefusalLogOptions options = Options();
  options.max_keys = 1;
  options.lines_per_key = 1;
  RefusalLog log(logger_, options);
  Refuse(log, "a", "r", 1);
  Refuse(log, "b", "r", 1);  // beyond the cap: the shared count's one line
  Refuse(log, "c", "r", 1);  // suppressed
  EXPECT_EQ(Lines().size(), 2u);
  now_ += absl::Seconds(60);
  Refuse(log, "c", "r", 1);  // the summary, then c is tracked now
  Refuse(log, "d", "r", 1);
  const std::vector<std::string> lines = Lines();
  EXPECT_THAT(std::vector<std::string>(lines.begin() + 2, lines.end()),
              ElementsAre("1 more refusals of further peers and reasons (1 are "
                          "tracked) in the last 60 s were not logged",
                          "c refused: call 0", "d refused: call 0"));
}

TEST_F(RefusalLogTest, DestructionLogsWhatIsStillCounted) {
  {
    RefusalLog log(logger_, Options());
    Refuse(log, "worker 0", "push FAILED_PRECONDITION", 8);
  }
  EXPECT_EQ(Lines().back(),
            "3 more refusals of push FAILED_PRECONDITION from worker 0 before "
            "shutdown were not logged");
}

TEST_F(RefusalLogTest, LongPeersAndReasonsAreCut) {
  RefusalLogOptions options = Options();
  options.lines_per_key = 0;
  RefusalLog log(logger_, options);
  const std::string peer(10000, 'p');
  Refuse(log, peer, "r", 2);
  Refuse(log, peer + "q", "r", 1);  // the same first 128 characters
  now_ += absl::Seconds(60);
  log.Flush();
  ASSERT_EQ(Lines().size(), 1u);
  EXPECT_EQ(Lines()[0], absl::StrCat("3 more refusals of r from ",
                                     std::string(128, 'p'),
                                     " in the last 60 s were not logged"));
}

TEST(RefusalLogConcurrencyTest, ThreadsShareTheCounts) {
  CapturedLog captured;
  absl::Time now = absl::FromUnixSeconds(1000);
  RefusalLogOptions options;
  options.clock = [&now] { return now; };
  {
    RefusalLog log(captured.logger(), options);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&log] {
        for (int i = 0; i < 500; ++i) log.Warn("p", "r", "refused {}", i);
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(captured.Lines().size(), 5u);
  }
  EXPECT_EQ(captured.Lines().back(),
            "3995 more refusals of r from p before shutdown were not logged");
}

TEST(RefusalReasonTest, IsTheCallAndTheCode) {
  EXPECT_EQ(RefusalReason("push", absl::FailedPreconditionError("step 9 ...")),
            "push FAILED_PRECONDITION");
}

TEST(PeerHostTest, DropsThePort) {
  EXPECT_EQ(PeerHost("ipv4:10.0.0.7:53211"), "ipv4:10.0.0.7");
  EXPECT_EQ(PeerHost("ipv6:[::1]:40000"), "ipv6:[::1]");
  EXPECT_EQ(PeerHost("ipv6:%5B::1%5D:40000"), "ipv6:%5B::1%5D");
}

TEST(PeerHostTest, KeepsWhatHasNoPort) {
  EXPECT_EQ(PeerHost("unix:/tmp/tern.sock"), "unix:/tmp/tern.sock");
  EXPECT_EQ(PeerHost("ipv6:::1"), "ipv6:::1");
  EXPECT_EQ(PeerHost("ipv4:10.0.0.7"), "ipv4:10.0.0.7");
  EXPECT_EQ(PeerHost("ipv4:10.0.0.7:x"), "ipv4:10.0.0.7:x");
  EXPECT_EQ(PeerHost(""), "");
}

// Made-up ids share one key; the members of the run have their own.
TEST(MemberKeyTest, NamesMembersAndFoldsUnknownIds) {
  EXPECT_EQ(MemberKey("worker", 3, 4), "worker 3");
  EXPECT_EQ(MemberKey("worker", 4, 4), "an unknown worker");
  EXPECT_EQ(MemberKey("data center", 4000000000u, 3),
            "an unknown data center");
}

}  // namespace
}  // namespace tern
