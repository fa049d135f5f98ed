#include "parallel/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "kernels/cuda/cuda_status.h"
#include "parallel/rank_order_sum_launch.h"

namespace loom {
namespace {

static_assert(sizeof(NcclUniqueId) == sizeof(ncclUniqueId), "NCCL_UNIQUE_ID_BYTES changed");

absl::Status NcclStatus(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return absl::OkStatus();
  const std::string msg = absl::StrFormat("%s: NCCL error %d: %s", what, static_cast<int>(r),
                                          ncclGetErrorString(r));
  switch (r) {
    case ncclInvalidArgument:
    case ncclInvalidUsage: return absl::InvalidArgumentError(msg);
    case ncclSystemError:
    case ncclRemoteError: return absl::UnavailableError(msg);
    default: return absl::InternalError(msg);
  }
}

absl::Status Cuda(cudaError_t e, const char* what) {
  return kernels::cuda::CudaStatus(e, what);
}

}  // namespace

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* scratch = nullptr;  // device [capacity] (rank-order AllReduceSum, Barrier)
  size_t capacity = 0;
  NcclCommunicatorOptions options;
  absl::Status failed;  // sticky

  ~Impl() {
    if (comm != nullptr) {
      if (failed.ok()) {
        ncclCommDestroy(comm);
      } else {
        ncclCommAbort(comm);
      }
    }
    if (scratch != nullptr) cudaFree(scratch);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  absl::Status Fail(absl::Status s) {
    if (failed.ok()) failed = std::move(s);
    return failed;
  }

  absl::Status Reserve(size_t n) {
    if (n <= capacity) return absl::OkStatus();
    if (scratch != nullptr) cudaFree(scratch);
    scratch = nullptr;
    capacity = 0;
    if (absl::Status s = Cuda(cudaMalloc(&scratch, n * sizeof(float)), "NCCL scratch");
        !s.ok()) {
      return s;
    }
    capacity = n;
    return absl::OkStatus();
  }

  // Waits for the queued collective: polls the stream and NCCL's async error; aborts the
  // communicator after the timeout.
  absl::Status Wait(const char* what) {
    const absl::Time deadline = absl::Now() + options.timeout;
    for (int spins = 0;; ++spins) {
      const cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) return absl::OkStatus();
      if (q != cudaErrorNotReady) return Fail(Cuda(q, what));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        ncclCommAbort(comm);
        comm = nullptr;
        return Fail(NcclStatus(async, what));
      }
      if (absl::Now() > deadline) {
        ncclCommAbort(comm);
        comm = nullptr;
        return Fail(absl::DeadlineExceededError(absl::StrFormat(
            "NcclCommunicator: %s did not complete within %s (peers missing?); "
            "communicator aborted",
            what, absl::FormatDuration(options.timeout))));
      }
      if (spins > 1000) absl::SleepFor(absl::Microseconds(50));
    }
  }
};

absl::StatusOr<NcclUniqueId> NcclGetUniqueId() {
  ncclUniqueId id;
  if (absl::Status s = NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"); !s.ok()) return s;
  NcclUniqueId out;
  std::memcpy(out.bytes, id.internal, sizeof(out.bytes));
  return out;
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl, int rank, int world_size,
                                   int device)
    : impl_(std::move(impl)), rank_(rank), world_size_(world_size), device_(device) {}

NcclCommunicator::~NcclCommunicator() {
  if (impl_) cudaSetDevice(device_);
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    const NcclUniqueId& id, int rank, int world_size, int device,
    const NcclCommunicatorOptions& options) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("NcclCommunicator: rank %d of world size %d", rank, world_size));
  }
  if (absl::Status s = Cuda(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (absl::Status s = Cuda(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking),
                            "cudaStreamCreate");
      !s.ok()) {
    return s;
  }
  ncclUniqueId nid;
  std::memcpy(nid.internal, id.bytes, sizeof(id.bytes));
  if (absl::Status s = NcclStatus(ncclCommInitRank(&impl->comm, world_size, nid, rank),
                                  "ncclCommInitRank");
      !s.ok()) {
    impl->comm = nullptr;
    return s;
  }
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(std::move(impl), rank, world_size, device));
}

absl::StatusOr<std::vector<std::unique_ptr<NcclCommunicator>>> NcclCommunicator::CreateAll(
    const std::vector<int>& devices, const NcclCommunicatorOptions& options) {
  const int w = static_cast<int>(devices.size());
  if (w < 1) return absl::InvalidArgumentError("NcclCommunicator::CreateAll: no devices");
  std::vector<ncclComm_t> comms(w, nullptr);
  if (absl::Status s = NcclStatus(ncclCommInitAll(comms.data(), w, devices.data()),
                                  "ncclCommInitAll");
      !s.ok()) {
    return s;
  }
  std::vector<std::unique_ptr<NcclCommunicator>> out;
  absl::Status err;
  for (int r = 0; r < w; ++r) {
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    impl->comm = comms[r];
    if (err.ok()) err = Cuda(cudaSetDevice(devices[r]), "cudaSetDevice");
    if (err.ok()) {
      err = Cuda(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking),
                 "cudaStreamCreate");
    }
    out.push_back(std::unique_ptr<NcclCommunicator>(
        new NcclCommunicator(std::move(impl), r, w, devices[r])));
  }
  if (!err.ok()) return err;  // the endpoints' destructors release the communicators
  return out;
}

absl::Status NcclCommunicator::AllReduceSum(float* buf, size_t n) {
  Impl& m = *impl_;
  if (!m.failed.ok()) return m.failed;
  if (absl::Status s = Cuda(cudaSetDevice(device_), "cudaSetDevice"); !s.ok()) return s;
  if (m.options.reduce_order == NcclCommunicatorOptions::ReduceOrder::kNcclNative) {
    if (absl::Status s = NcclStatus(
            ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, m.comm, m.stream), "ncclAllReduce");
        !s.ok()) {
      return m.Fail(s);
    }
    return m.Wait("AllReduceSum");
  }
  if (absl::Status s = m.Reserve(n * world_size_); !s.ok()) return m.Fail(s);
  if (absl::Status s = NcclStatus(ncclAllGather(buf, m.scratch, n, ncclFloat, m.comm, m.stream),
                                  "ncclAllGather");
      !s.ok()) {
    return m.Fail(s);
  }
  if (absl::Status s = Cuda(
          parallel_cuda::LaunchRankOrderSum(m.scratch, world_size_, n, buf, m.stream),
          "rank-order sum");
      !s.ok()) {
    return m.Fail(s);
  }
  return m.Wait("AllReduceSum");
}

absl::Status NcclCommunicator::AllGather(const float* in, size_t n_per_rank, float* out) {
  Impl& m = *impl_;
  if (!m.failed.ok()) return m.failed;
  if (absl::Status s = Cuda(cudaSetDevice(device_), "cudaSetDevice"); !s.ok()) return s;
  if (absl::Status s = NcclStatus(
          ncclAllGather(in, out, n_per_rank, ncclFloat, m.comm, m.stream), "ncclAllGather");
      !s.ok()) {
    return m.Fail(s);
  }
  return m.Wait("AllGather");
}

absl::Status NcclCommunicator::Broadcast(float* buf, size_t n, int root) {
  Impl& m = *impl_;
  if (!m.failed.ok()) return m.failed;
  if (root < 0 || root >= world_size_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "NcclCommunicator: Broadcast root %d outside [0, %d)", root, world_size_));
  }
  if (absl::Status s = Cuda(cudaSetDevice(device_), "cudaSetDevice"); !s.ok()) return s;
  if (absl::Status s = NcclStatus(
          ncclBroadcast(buf, buf, n, ncclFloat, root, m.comm, m.stream), "ncclBroadcast");
      !s.ok()) {
    return m.Fail(s);
  }
  return m.Wait("Broadcast");
}

absl::Status NcclCommunicator::Barrier() {
  Impl& m = *impl_;
  if (!m.failed.ok()) return m.failed;
  if (absl::Status s = Cuda(cudaSetDevice(device_), "cudaSetDevice"); !s.ok()) return s;
  if (absl::Status s = m.Reserve(1); !s.ok()) return m.Fail(s);
  if (absl::Status s = NcclStatus(
          ncclAllReduce(m.scratch, m.scratch, 1, ncclFloat, ncclSum, m.comm, m.stream),
          "ncclAllReduce (barrier)");
      !s.ok()) {
    return m.Fail(s);
  }
  return m.Wait("Barrier");
}

void NcclCommunicator::Abort(const absl::Status& reason) {
  Impl& m = *impl_;
  if (m.comm != nullptr) {
    ncclCommAbort(m.comm);
    m.comm = nullptr;
  }
  m.Fail(absl::AbortedError(absl::StrFormat("rank %d aborted the group: %s", rank_,
                                            reason.message())))
      .IgnoreError();
}

}  // namespace loom
