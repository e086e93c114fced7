#include "worker/fingerprint.h"

#include "gtest/gtest.h"

namespace tern::worker {
namespace {

tern::v1::ParamSpec TwoTensorSpec() {
  tern::v1::ParamSpec spec;
  auto* weight = spec.add_tensors();
  weight->set_name("fc.weight");
  weight->add_shape(10);
  weight->add_shape(20);
  weight->set_dtype(tern::v1::DTYPE_FLOAT32);
  auto* bias = spec.add_tensors();
  bias->set_name("fc.bias");
  bias->add_shape(10);
  bias->set_dtype(tern::v1::DTYPE_FLOAT32);
  return spec;
}

TEST(Fnv1a64Test, MatchesPublishedVectors) {
  // Test vectors of the FNV reference (Landon Curt Noll's fnv_test.c).
  EXPECT_EQ(Fnv1a64().value(), 0xcbf29ce484222325ull);
  Fnv1a64 a;
  a.Update("a");
  EXPECT_EQ(a.value(), 0xaf63dc4c8601ec8cull);
  Fnv1a64 foobar;
  foobar.Update("foobar");
  EXPECT_EQ(foobar.value(), 0x85944171f73967e8ull);
}

TEST(Fnv1a64Test, IsIncremental) {
  Fnv1a64 whole, parts;
  whole.Update("foobar");
  parts.Update("foo");
  parts.Update("bar");
  EXPECT_EQ(whole.value(), parts.value());
}

TEST(ParamSpecHashTest, IsStableAcrossCallsAndCopies) {
  const tern::v1::ParamSpec spec = TwoTensorSpec();
  const tern::v1::ParamSpec copy = spec;
  EXPECT_EQ(ParamSpecHash(spec), ParamSpecHash(copy));
  // Pinned value, computed by an independent Python rendering of the byte
  // sequence documented in fingerprint.h: a change of the encoding would
  // make old and new binaries refuse to train together, so change it only
  // on purpose.
  EXPECT_EQ(ParamSpecHash(spec), 0xd25434fc846f9c51ull);
}

TEST(ParamSpecHashTest, ChangesWithNamesShapesOrderAndDtype) {
  const tern::v1::ParamSpec spec = TwoTensorSpec();
  const uint64_t base = ParamSpecHash(spec);

  tern::v1::ParamSpec renamed = spec;
  renamed.mutable_tensors(1)->set_name("fc.bias2");
  EXPECT_NE(ParamSpecHash(renamed), base);

  tern::v1::ParamSpec reshaped = spec;
  reshaped.mutable_tensors(0)->set_shape(1, 21);
  EXPECT_NE(ParamSpecHash(reshaped), base);

  // Same element count, different shape.
  tern::v1::ParamSpec transposed = spec;
  transposed.mutable_tensors(0)->set_shape(0, 20);
  transposed.mutable_tensors(0)->set_shape(1, 10);
  EXPECT_NE(ParamSpecHash(transposed), base);

  tern::v1::ParamSpec reordered;
  *reordered.add_tensors() = spec.tensors(1);
  *reordered.add_tensors() = spec.tensors(0);
  EXPECT_NE(ParamSpecHash(reordered), base);

  tern::v1::ParamSpec untyped = spec;
  untyped.mutable_tensors(0)->set_dtype(tern::v1::DTYPE_UNSPECIFIED);
  EXPECT_NE(ParamSpecHash(untyped), base);

  tern::v1::ParamSpec shorter = spec;
  shorter.mutable_tensors()->RemoveLast();
  EXPECT_NE(ParamSpecHash(shorter), base);
}

TEST(ParamSpecHashTest, NameBoundariesMatter) {
  // "ab" + "c" must not hash like "a" + "bc": names are length-prefixed.
  tern::v1::ParamSpec left, right;
  left.add_tensors()->set_name("ab");
  left.add_tensors()->set_name("c");
  right.add_tensors()->set_name("a");
  right.add_tensors()->set_name("bc");
  EXPECT_NE(ParamSpecHash(left), ParamSpecHash(right));
}

TEST(FormatChecksumTest, IsZeroPaddedLowerHex) {
  EXPECT_EQ(FormatChecksum(0), "0x0000000000000000");
  EXPECT_EQ(FormatChecksum(0xABCDEFull), "0x0000000000abcdef");
  EXPECT_EQ(FormatChecksum(~0ull), "0xffffffffffffffff");
}

}  // namespace
}  // namespace tern::worker
