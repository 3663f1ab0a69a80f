#pragma once
// Where the unit tests find their data and helper programs. The paths are compiled into one
// file that CMake generates (build/tests/test_paths.cpp, linked into every test binary), not
// into each test's command line: a clone in another folder then compiles every test source to
// the same object, which the compiler cache reuses (scripts/test, docs/testing.md).

namespace assay::test {

/// The repository's root, absolute, without a trailing slash.
extern const char* const kSourceDir;
/// The repository's tests/ folder (fixtures under tests/<folder>/data, tests/data).
extern const char* const kTestDataDir;
/// ../shared/data beside the repository: the human-labelled RAG events (its README).
extern const char* const kSharedDataDir;
/// The fake LLM provider of this build (tests/tools/fake_llm_server.cpp).
extern const char* const kFakeLlmServer;

}  // namespace assay::test
