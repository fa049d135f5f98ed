// AtomGpuGeometry: the shape of one Atom-quantized layer as the CUDA kernels see it (see
// atom_gpu_layout.h for the layout). POD, no dependencies: included by nvcc and gcc code.
#ifndef LOOM_KERNELS_CUDA_ATOM_GPU_GEOMETRY_H_
#define LOOM_KERNELS_CUDA_ATOM_GPU_GEOMETRY_H_

#ifdef __CUDACC__
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif

namespace loom::kernels::cuda {

// Shape shared by the weights and activations of one layer (POD: passed to kernels).
struct AtomGpuGeometry {
  int k = 0;                // input channels
  int k_normal = 0;         // k - n_outliers
  int k_normal_padded = 0;  // n_groups * group
  int n_groups = 0;
  int group = 128;          // multiple of 64
  int n_outliers = 0;
  int n_out_pad = 0;        // round_up(n_outliers, 32)
  int w_bits = 4;           // 4 or 8
  int a_bits = 4;           // 4 or 8 (w_bits 8 requires a_bits 8)
  LOOM_HOST_DEVICE int weight_row_bytes() const {
    return w_bits == 4 ? k_normal_padded / 2 : k_normal_padded;
  }
  LOOM_HOST_DEVICE int act_row_bytes() const {
    return a_bits == 4 ? k_normal_padded / 2 : k_normal_padded;
  }
};

}  // namespace loom::kernels::cuda

#endif  // LOOM_KERNELS_CUDA_ATOM_GPU_GEOMETRY_H_
