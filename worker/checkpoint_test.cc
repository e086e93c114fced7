#include "worker/checkpoint.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/checksum.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tern::worker {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

tern::v1::WorkerCheckpoint Sample() {
  tern::v1::WorkerCheckpoint c;
  c.set_format_version(kCheckpointFormatVersion);
  c.set_run_id("run-a");
  c.set_worker_id(1);
  c.set_num_workers(3);
  c.set_codec("onebit");
  c.set_param_spec_hash(0x1234);
  c.set_steps(100);
  c.set_next_step(40);
  c.set_data_position(40);
  const float params[3] = {1.5f, -2.0f, 0.25f};
  c.set_params(std::string(reinterpret_cast<const char*>(params),
                           sizeof(params)));
  c.set_param_checksum(0xabcdef);
  c.set_optimizer_state("optimizer bytes");
  c.set_residual_state(std::string("\0\1\2", 3));
  return c;
}

CheckpointIdentity IdentityOf(const tern::v1::WorkerCheckpoint& c) {
  CheckpointIdentity id;
  id.run_id = c.run_id();
  id.worker_id = c.worker_id();
  id.num_workers = c.num_workers();
  id.codec = c.codec();
  id.param_spec_hash = c.param_spec_hash();
  id.num_params = c.params().size() / sizeof(float);
  id.steps = c.steps();
  return id;
}

TEST(CheckpointTest, PathNamesTheWorker) {
  EXPECT_EQ(CheckpointPath("/ckpt", 3), "/ckpt/worker-3.ckpt");
  EXPECT_EQ(CheckpointPath("/ckpt/", 0), "/ckpt/worker-0.ckpt");
}

TEST(CheckpointTest, RoundTripsIntoANewDirectoryAndLeavesNoTemporaryFile) {
  const std::string dir = TempDir() + "/round_trip/a/b";
  const std::string path = CheckpointPath(dir, 1);
  const tern::v1::WorkerCheckpoint written = Sample();
  ASSERT_TRUE(WriteCheckpoint(path, written).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  absl::StatusOr<tern::v1::WorkerCheckpoint> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->SerializeAsString(), written.SerializeAsString());
  EXPECT_TRUE(CheckCheckpointIdentity(*read, IdentityOf(written), path).ok());
}

TEST(CheckpointTest, AWriteReplacesTheOldCheckpointWhole) {
  const std::string path = CheckpointPath(TempDir() + "/replace", 0);
  tern::v1::WorkerCheckpoint first = Sample();
  first.set_optimizer_state(std::string(100000, 'x'));
  ASSERT_TRUE(WriteCheckpoint(path, first).ok());
  tern::v1::WorkerCheckpoint second = Sample();
  second.set_next_step(41);
  ASSERT_TRUE(WriteCheckpoint(path, second).ok());
  absl::StatusOr<tern::v1::WorkerCheckpoint> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->next_step(), 41u);
  EXPECT_EQ(read->optimizer_state(), "optimizer bytes");
}

TEST(CheckpointTest, AMissingFileIsNotFound) {
  absl::StatusOr<tern::v1::WorkerCheckpoint> read =
      ReadCheckpoint(TempDir() + "/nowhere/worker-0.ckpt");
  EXPECT_TRUE(absl::IsNotFound(read.status())) << read.status();
}

TEST(CheckpointTest, AnUnwritableDirectoryIsAnErrorNamingIt) {
  // A regular file where the directory should be.
  const std::string file = TempDir() + "/not_a_dir";
  std::ofstream(file) << "x";
  const absl::Status status =
      WriteCheckpoint(CheckpointPath(file + "/sub", 0), Sample());
  EXPECT_TRUE(absl::IsInternal(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("not_a_dir"));
}

TEST(CheckpointTest, TruncatedCorruptOrForeignFilesAreDataLoss) {
  const std::string good = TempDir() + "/good.ckpt";
  ASSERT_TRUE(WriteCheckpoint(good, Sample()).ok());
  std::ifstream in(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 40u);
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  const struct {
    std::string content;
    const char* why;
  } cases[] = {
      // Cut at the last field: the message alone would still parse.
      {bytes.substr(0, bytes.size() - 8 - 5), "truncated"},
      {bytes.substr(0, bytes.size() / 2), "truncated"},
      {bytes + "x", "trailing bytes"},
      {flipped, "corrupt"},
      {"{\"json\": true}", "not a tern worker checkpoint"},
      {std::string("\xff\xff\xff\xff", 4), "not a tern worker checkpoint"},
      // The frame before XXH3 (magic "TERNCKPT", FNV-1a 64).
      {"TERNCKPT" + bytes.substr(8), "older tern"},
  };
  const std::string path = TempDir() + "/bad.ckpt";
  for (const auto& test : cases) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << test.content;
    absl::StatusOr<tern::v1::WorkerCheckpoint> read = ReadCheckpoint(path);
    EXPECT_TRUE(absl::IsDataLoss(read.status())) << test.why << read.status();
    EXPECT_THAT(read.status().message(), HasSubstr(path));
    EXPECT_THAT(read.status().message(), HasSubstr(test.why));
  }
}

// The frame: magic, length, message, the message's checksum
// (common/checksum.h), integers little-endian.
TEST(CheckpointTest, TheFrameEndsWithTheMessagesChecksum) {
  const std::string path = TempDir() + "/framed.ckpt";
  ASSERT_TRUE(WriteCheckpoint(path, Sample()).ok());
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 8), "TERNCKP2");
  const std::string message = bytes.substr(16, bytes.size() - 24);
  std::string message_bytes;
  ASSERT_TRUE(Sample().SerializeToString(&message_bytes));
  EXPECT_EQ(message, message_bytes);
  uint64_t recorded = 0;
  for (int i = 7; i >= 0; --i) {
    recorded = (recorded << 8) |
               static_cast<uint8_t>(bytes[bytes.size() - 8 + i]);
  }
  EXPECT_EQ(recorded, ChecksumOf(message));
}

TEST(CheckpointTest, AnotherFormatVersionOrPartialFloatsAreDataLoss) {
  const std::string path = TempDir() + "/version.ckpt";
  tern::v1::WorkerCheckpoint future = Sample();
  future.set_format_version(2);
  ASSERT_TRUE(WriteCheckpoint(path, future).ok());
  absl::StatusOr<tern::v1::WorkerCheckpoint> read = ReadCheckpoint(path);
  EXPECT_TRUE(absl::IsDataLoss(read.status())) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("format version 2"));

  tern::v1::WorkerCheckpoint odd = Sample();
  odd.set_params("12345");
  ASSERT_TRUE(WriteCheckpoint(path, odd).ok());
  read = ReadCheckpoint(path);
  EXPECT_TRUE(absl::IsDataLoss(read.status())) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("5 parameter bytes"));
}

TEST(CheckpointTest, EachIdentityFieldThatDiffersIsNamed) {
  const tern::v1::WorkerCheckpoint c = Sample();
  struct Case {
    const char* field;
    void (*change)(CheckpointIdentity*);
  };
  const Case cases[] = {
      {"run_id", [](CheckpointIdentity* id) { id->run_id = "run-b"; }},
      {"worker_id", [](CheckpointIdentity* id) { id->worker_id = 2; }},
      {"num_workers", [](CheckpointIdentity* id) { id->num_workers = 4; }},
      {"codec", [](CheckpointIdentity* id) { id->codec = "terngrad"; }},
      {"param spec hash",
       [](CheckpointIdentity* id) { id->param_spec_hash = 1; }},
      {"parameter count", [](CheckpointIdentity* id) { id->num_params = 4; }},
      {"steps", [](CheckpointIdentity* id) { id->steps = 200; }},
  };
  for (const Case& test : cases) {
    CheckpointIdentity id = IdentityOf(c);
    test.change(&id);
    const absl::Status status = CheckCheckpointIdentity(c, id, "p.ckpt");
    EXPECT_TRUE(absl::IsFailedPrecondition(status)) << test.field;
    EXPECT_THAT(status.message(), HasSubstr(test.field));
    EXPECT_THAT(status.message(), HasSubstr("p.ckpt"));
  }
}

TEST(CheckpointTest, AFinishedRunIsNotResumed) {
  tern::v1::WorkerCheckpoint c = Sample();
  c.set_next_step(c.steps());
  const absl::Status status =
      CheckCheckpointIdentity(c, IdentityOf(c), "done.ckpt");
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("finished run (step 100 of 100)"));
}

}  // namespace
}  // namespace tern::worker
