#include <cstdio>

#include "rlx/rlx.h"

int main() {
  std::printf("rlx %s\n", rlx::kVersion);
  return 0;
}
