// Debian's civetweb 1.15, the HTTP server under prometheus-cpp's exposer,
// starts every thread with a fixed 100 KiB stack (built with
// USE_STACK_SIZE=102400). glibc carves a thread's static TLS out of its
// stack and refuses a stack that cannot hold it (pthread_create: EINVAL),
// and tern's static TLS is about that size (libopenblas 60 KiB, libglog
// 30 KiB and libtorch 10 KiB, through libtorch): the exposer then fails to
// start in every role with "Cannot create threads".
//
// This definition, linked into the binary, comes before libc's for every
// shared library (the dynamic linker looks in the executable first), and
// raises a requested stack size below kMinStackBytes to it, then calls
// libc's. A larger stack only costs address space; a stack too small to
// start a thread is never what a caller meant. Sizes from kMinStackBytes up
// pass through unchanged.
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cstddef>

namespace {

constexpr size_t kMinStackBytes = size_t{1} << 20;

using SetStackSize = int (*)(pthread_attr_t*, size_t);

}  // namespace

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr,
                                         size_t stack_size) {
  // Looked up once; the next definition is libc's (or a sanitizer's).
  static const SetStackSize next = reinterpret_cast<SetStackSize>(
      dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  return next(attr, std::max(stack_size, kMinStackBytes));
}
