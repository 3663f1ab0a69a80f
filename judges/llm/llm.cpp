// Anchor translation unit of assay_llm (the library's other files arrive with issue 3).
namespace assay::llm {
int libraryVersion() { return 1; }
}  // namespace assay::llm
