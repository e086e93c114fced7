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

TEST(ParamSpecHashTest, IsStableAcrossCallsAndCopies) {
  const tern::v1::ParamSpec spec = TwoTensorSpec();
  const tern::v1::ParamSpec copy = spec;
  EXPECT_EQ(ParamSpecHash(spec), ParamSpecHash(copy));
  // Pinned value: XXH3-64 (the xxHash library's own XXH3_64bits) of an
  // independent Python rendering of the byte sequence documented in
  // fingerprint.h. A change of the encoding would make old and new binaries
  // refuse to train together, so change it only on purpose.
  EXPECT_EQ(ParamSpecHash(spec), 0xea5c781c2371c781ull);
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

}  // namespace
}  // namespace tern::worker
