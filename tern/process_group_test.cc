#include "tern/process_group.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(LineBufferTest, SplitsAcrossChunks) {
  LineBuffer buffer;
  EXPECT_THAT(buffer.Append("ab"), IsEmpty());
  EXPECT_THAT(buffer.Append("c\nde\r\n\nf"), ElementsAre("abc", "de", ""));
  EXPECT_EQ(buffer.Flush(), "f");
  EXPECT_EQ(buffer.Flush(), std::nullopt);
}

TEST(LineBufferTest, CutsOverlongLines) {
  LineBuffer buffer(4);
  EXPECT_THAT(buffer.Append("abcdefghij\nxy\n"),
              ElementsAre("abcd", "efgh", "ij", "xy"));
  // A line of exactly the limit is not followed by an empty line.
  EXPECT_THAT(buffer.Append("wxyz\nq\n"), ElementsAre("wxyz", "q"));
}

std::string TestTmp() { return std::getenv("TEST_TMPDIR"); }

ChildSpec Shell(std::string name, std::string script) {
  ChildSpec spec;
  spec.name = std::move(name);
  spec.path = "/bin/sh";
  spec.argv = {"sh", "-c", std::move(script)};
  return spec;
}

// Polls until every child has exited or `limit` passes.
void PollUntilAllExit(ProcessGroup& group, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  auto any_running = [&] {
    for (size_t i = 0; i < group.size(); ++i) {
      if (group.running(i)) return true;
    }
    return false;
  };
  while (any_running() && absl::Now() < deadline) {
    group.Poll(absl::Milliseconds(50));
  }
}

TEST(ProcessGroupTest, CollectsLinesOfBothStreamsAndExitCodes) {
  std::vector<std::pair<std::string, std::string>> lines;
  auto group = ProcessGroup::Create(
      [&](const std::string& child, absl::string_view line) {
        lines.emplace_back(child, std::string(line));
      });
  ASSERT_TRUE(group.ok()) << group.status();
  ChildSpec a = Shell("a", "echo one; echo two >&2; printf tail; exit 3");
  a.log_path = TestTmp() + "/a.log";
  ASSERT_TRUE((*group)->Spawn(a).ok());
  ASSERT_TRUE((*group)->Spawn(Shell("b", "exit 0")).ok());
  PollUntilAllExit(**group, absl::Seconds(20));

  ASSERT_FALSE((*group)->running(0));
  EXPECT_FALSE((*group)->exit(0)->signaled());
  EXPECT_EQ((*group)->exit(0)->code_or_signal(), 3);
  EXPECT_EQ((*group)->exit(0)->Describe(), "exit code 3");
  EXPECT_TRUE((*group)->exit(1)->success());
  EXPECT_THAT(lines, ElementsAre(std::make_pair("a", "one"),
                                 std::make_pair("a", "two"),
                                 std::make_pair("a", "tail")));
  EXPECT_THAT((*group)->LastLines(0), ElementsAre("one", "two", "tail"));
  std::ifstream log(a.log_path);
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_EQ(text.str(), "one\ntwo\ntail\n");
  std::vector<size_t> exited = (*group)->TakeExited();
  std::sort(exited.begin(), exited.end());
  EXPECT_THAT(exited, ElementsAre(0, 1));
  EXPECT_THAT((*group)->TakeExited(), IsEmpty());
}

TEST(ProcessGroupTest, KeepsOnlyTheLastLines) {
  auto group = ProcessGroup::Create(nullptr, /*keep_lines=*/2);
  ASSERT_TRUE(group.ok());
  ASSERT_TRUE((*group)->Spawn(Shell("c", "for i in 1 2 3 4 5; do echo $i; done"))
                  .ok());
  PollUntilAllExit(**group, absl::Seconds(20));
  EXPECT_THAT((*group)->LastLines(0), ElementsAre("4", "5"));
}

TEST(ProcessGroupTest, ExecFailureExits127) {
  auto group = ProcessGroup::Create(nullptr);
  ASSERT_TRUE(group.ok());
  ChildSpec spec;
  spec.name = "missing";
  spec.path = "/nonexistent/tern-binary";
  spec.argv = {"tern-binary"};
  ASSERT_TRUE((*group)->Spawn(spec).ok());
  PollUntilAllExit(**group, absl::Seconds(20));
  ASSERT_FALSE((*group)->running(0));
  EXPECT_EQ((*group)->exit(0)->code_or_signal(), 127);
}

TEST(ProcessGroupTest, UnsetsEnvironmentVariables) {
  ::setenv("TERN_PROCESS_GROUP_TEST_A", "a", 1);
  ::setenv("TERN_PROCESS_GROUP_TEST_B", "b", 1);
  auto group = ProcessGroup::Create(nullptr);
  ASSERT_TRUE(group.ok());
  ChildSpec spec = Shell(
      "env", "echo \"${TERN_PROCESS_GROUP_TEST_A:-unset}"
             " ${TERN_PROCESS_GROUP_TEST_B:-unset}\"");
  spec.unset_env = {"TERN_PROCESS_GROUP_TEST_A"};
  ASSERT_TRUE((*group)->Spawn(spec).ok());
  PollUntilAllExit(**group, absl::Seconds(20));
  EXPECT_THAT((*group)->LastLines(0), ElementsAre("unset b"));
}

TEST(ProcessGroupTest, StopTermsThenKillsTheStubborn) {
  auto group = ProcessGroup::Create(nullptr);
  ASSERT_TRUE(group.ok());
  // "polite" dies on SIGTERM; "stubborn" ignores it and needs SIGKILL.
  ASSERT_TRUE((*group)->Spawn(Shell("polite", "echo up; sleep 30")).ok());
  ASSERT_TRUE(
      (*group)
          ->Spawn(Shell("stubborn", "trap '' TERM; echo up; "
                                    "while :; do sleep 0.05; done"))
          .ok());
  // Wait until both shells run their scripts (the trap is installed).
  const absl::Time ready_deadline = absl::Now() + absl::Seconds(20);
  while (((*group)->LastLines(0).empty() || (*group)->LastLines(1).empty()) &&
         absl::Now() < ready_deadline) {
    (*group)->Poll(absl::Milliseconds(50));
  }
  const absl::Time start = absl::Now();
  (*group)->StopAll(absl::Milliseconds(500));
  const absl::Duration took = absl::Now() - start;

  ASSERT_FALSE((*group)->running(0));
  ASSERT_FALSE((*group)->running(1));
  EXPECT_TRUE((*group)->exit(0)->signaled());
  EXPECT_EQ((*group)->exit(0)->code_or_signal(), SIGTERM);
  EXPECT_TRUE((*group)->exit(1)->signaled());
  EXPECT_EQ((*group)->exit(1)->code_or_signal(), SIGKILL);
  EXPECT_GE(took, absl::Milliseconds(450));
  EXPECT_LT(took, absl::Seconds(10));
}

TEST(ProcessGroupTest, SeesSigtermSentToThisProcess) {
  auto group = ProcessGroup::Create(nullptr);
  ASSERT_TRUE(group.ok());
  EXPECT_EQ((*group)->interrupt_signal(), 0);
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while ((*group)->interrupt_signal() == 0 && absl::Now() < deadline) {
    (*group)->Poll(absl::Milliseconds(50));
  }
  EXPECT_EQ((*group)->interrupt_signal(), SIGTERM);
}

TEST(ProcessGroupTest, ChildrenDieWithTheirLauncher) {
  // A middle process spawns a sleeping child through a ProcessGroup and is
  // then SIGKILLed: PR_SET_PDEATHSIG must take the grandchild down with it.
  const std::string pid_file = TestTmp() + "/grandchild.pid";
  const pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    auto group = ProcessGroup::Create(nullptr);
    if (!group.ok()) ::_exit(2);
    if (!(*group)->Spawn(Shell("sleeper", "echo $$ > " + pid_file +
                                              ".tmp; mv " + pid_file +
                                              ".tmp " + pid_file +
                                              "; exec sleep 60"))
             .ok()) {
      ::_exit(3);
    }
    while (true) (*group)->Poll(absl::Seconds(1));
  }
  pid_t grandchild = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (grandchild == 0 && absl::Now() < deadline) {
    std::ifstream in(pid_file);
    if (!(in >> grandchild)) {
      grandchild = 0;
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  ASSERT_GT(grandchild, 0);
  ASSERT_EQ(::kill(grandchild, 0), 0);
  ::kill(middle, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(middle, &status, 0), middle);
  // The grandchild is re-parented (to init or a subreaper) and reaped there;
  // it must be gone within a moment.
  const absl::Time gone_deadline = absl::Now() + absl::Seconds(10);
  bool gone = false;
  while (!gone && absl::Now() < gone_deadline) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string pid, comm, state;
    gone = !(stat >> pid >> comm >> state) || state == "Z";
    if (!gone) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(gone) << "pid " << grandchild << " outlived its launcher";
}

}  // namespace
}  // namespace tern
