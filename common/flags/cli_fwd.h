// The CLI11 classes that the Add*Flags(CLI::App*, ...) declarations name,
// declared without CLI/CLI.hpp. CLI11 is header-only and defines its
// validators as objects in every file that includes it (about 6 s of
// compile per file), so a header that only passes an App or an Option
// through includes this, and the .cc files that register or parse flags
// include CLI/CLI.hpp themselves.
#ifndef TERN_COMMON_FLAGS_CLI_FWD_H_
#define TERN_COMMON_FLAGS_CLI_FWD_H_

namespace CLI {
class App;
class Option;
}  // namespace CLI

#endif  // TERN_COMMON_FLAGS_CLI_FWD_H_
