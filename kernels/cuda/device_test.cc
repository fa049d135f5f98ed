#include "kernels/cuda/device.h"

#include <cstdlib>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_status.h"

namespace loom::kernels::cuda {
namespace {

// Hiding every device (before the runtime initialises) must give a clean kUnavailable
// on any machine, GPU or not: no abort, no count.
TEST(CudaDeviceTest, NoVisibleDeviceIsUnavailable) {
  ASSERT_EQ(setenv("CUDA_VISIBLE_DEVICES", "", 1), 0);
  const absl::StatusOr<int> count = CudaDeviceCount();
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.status().code(), absl::StatusCode::kUnavailable) << count.status();
  EXPECT_NE(count.status().message().find("cudaGetDeviceCount: cudaError"),
            std::string::npos)
      << count.status();
  EXPECT_FALSE(CudaAvailable());
}

TEST(CudaStatusTest, MapsErrorsToCodesWithNames) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "x").ok());
  const absl::Status oom = CudaStatus(cudaErrorMemoryAllocation, "alloc");
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(oom.message().rfind("alloc: cudaErrorMemoryAllocation (2): ", 0), 0u) << oom;
  EXPECT_EQ(CudaStatus(cudaErrorInsufficientDriver, "c").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaStatus(cudaErrorNoDevice, "c").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaStatus(cudaErrorInvalidValue, "c").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaStatus(cudaErrorLaunchFailure, "c").code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace loom::kernels::cuda
