// IQ codebook grids (generated into iq_grids.cc by scripts/gen_iq_grids.py).
// Each value packs one group's codes as little-endian bytes, byte j = element j.
#pragma once
#include <cstdint>

namespace rlx::quant {
extern const uint64_t iq2xxs_grid[256];
extern const uint64_t iq2xs_grid[512];
extern const uint64_t iq2s_grid[1024];
extern const uint32_t iq3xxs_grid[256];
extern const uint32_t iq3s_grid[512];
extern const uint64_t iq1s_grid[2048];  // bytes are int8 -1, 0, +1
}  // namespace rlx::quant
