#include "common/philox.h"

#include <set>

#include "gtest/gtest.h"

namespace tern {
namespace {

struct KnownAnswer {
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxCounter expected;
};

// The philox4x32 10-round vectors published with Random123
// (examples/kat_vectors): counter, key, output.
const KnownAnswer kKnownAnswers[] = {
    {{{0x00000000, 0x00000000, 0x00000000, 0x00000000}},
     {{0x00000000, 0x00000000}},
     {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
    {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     {{0xffffffff, 0xffffffff}},
     {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
    {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     {{0xa4093822, 0x299f31d0}},
     {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
};

TEST(PhiloxTest, MatchesPublishedKnownAnswers) {
  for (const KnownAnswer& answer : kKnownAnswers) {
    const PhiloxCounter out = Philox4x32_10(answer.counter, answer.key);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(out.v[i], answer.expected.v[i]) << "word " << i;
    }
  }
}

TEST(PhiloxTest, EveryStreamFieldChangesTheWords) {
  const RandomStream base{.seed = 42, .step = 7, .chunk = 3, .worker = 1};
  std::set<uint32_t> first_words;
  first_words.insert(RandomWords(base, 0).v[0]);
  RandomStream other = base;
  other.seed = base.seed + (1ull << 32);  // the high seed word matters too
  first_words.insert(RandomWords(other, 0).v[0]);
  other = base;
  other.step += 1;
  first_words.insert(RandomWords(other, 0).v[0]);
  other = base;
  other.chunk += 1;
  first_words.insert(RandomWords(other, 0).v[0]);
  other = base;
  other.worker += 1;
  first_words.insert(RandomWords(other, 0).v[0]);
  first_words.insert(RandomWords(base, 1).v[0]);
  EXPECT_EQ(first_words.size(), 6u);
  // And the same inputs give the same words.
  EXPECT_EQ(RandomWords(base, 5).v[2], RandomWords(base, 5).v[2]);
}

TEST(PhiloxTest, UniformFloatCoversUnitIntervalExactly) {
  EXPECT_EQ(UniformFloat(0), 0.0f);
  EXPECT_EQ(UniformFloat(0xffffffffu), 1.0f - 1.0f / 16777216.0f);
  EXPECT_LT(UniformFloat(0xffffffffu), 1.0f);
  EXPECT_EQ(UniformFloat(0x80000000u), 0.5f);
}

TEST(PhiloxTest, UniformFloatMeanIsOneHalf) {
  const RandomStream stream{.seed = 1};
  double sum = 0;
  const int groups = 1 << 16;
  for (uint32_t g = 0; g < groups; ++g) {
    const PhiloxCounter words = RandomWords(stream, g);
    for (uint32_t w : words.v) sum += UniformFloat(w);
  }
  const double mean = sum / (4.0 * groups);
  // Var of U(0,1) is 1/12; 2^18 draws: sd of mean ~ 5.6e-4. Six sigma.
  EXPECT_NEAR(mean, 0.5, 6 * 5.7e-4);
}

}  // namespace
}  // namespace tern
