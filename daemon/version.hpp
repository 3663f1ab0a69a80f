#pragma once
/// assay's version, from CMake's project(VERSION).
#ifndef ASSAY_VERSION
#define ASSAY_VERSION "0.0.0-dev"
#endif
namespace assay {
inline constexpr const char* kAssayVersion = ASSAY_VERSION;
}
