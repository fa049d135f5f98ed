#define LOOM_HADAMARD_FN HadamardRowsScalar
#include "kernels/cpu/rotation/hadamard_x86.inc"
