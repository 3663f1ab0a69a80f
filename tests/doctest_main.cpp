#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <spdlog/spdlog.h>

int main(int argc, char** argv) {
  // spdlog's registry is created on first use; assayd creates it on its main thread before
  // any worker starts (logging setup), and so do the tests. Created lazily by two workers at
  // once, ThreadSanitizer cannot see the guard inside the uninstrumented libspdlog.
  spdlog::default_logger();
  doctest::Context context(argc, argv);
  return context.run();
}
