#define LOOM_HADAMARD_FN HadamardRowsAvx2
#include "kernels/cpu/rotation/hadamard_x86.inc"
