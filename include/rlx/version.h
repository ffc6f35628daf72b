#pragma once
namespace rlx {
inline constexpr const char* kVersion = "0.1.0";
}
