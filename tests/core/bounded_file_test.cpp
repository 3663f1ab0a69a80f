// Reading an operator-named file as hostile input (core/bounded_file.hpp).
#include "core/bounded_file.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace assay;

TEST_CASE("readRegularFile: a small file costs its size, the limit is exact, no FIFO") {
  const std::string dir = "/tmp/assay_bounded_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string small = dir + "/small", big = dir + "/big", fifo = dir + "/fifo";
  std::ofstream(small) << "one line\n";
  std::ofstream(big) << std::string(100'000, 'x');
  std::string out;
  CHECK(readRegularFile(small, kMaxDataFileBytes, out).empty());
  CHECK(out == "one line\n");
  CHECK(out.capacity() < (1u << 20));  // not the 256 MiB limit, zero-filled (issue 29 trial)
  // At the limit: read; one byte over: refused with the sizes.
  CHECK(readRegularFile(big, 100'000, out).empty());
  CHECK(out.size() == 100'000);
  CHECK(readRegularFile(big, 99'999, out) == "is 97.7 KiB, over the 97.7 KiB limit");
  CHECK(out.empty());
  // An empty file, and one read past its stat size (doubling from 4 KiB).
  std::ofstream(small, std::ios::trunc).close();
  CHECK(readRegularFile(small, 10, out).empty());
  CHECK(out.empty());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(readRegularFile(fifo, 10, out) == "is a FIFO, not a regular file");
  std::filesystem::remove_all(dir);
}
