#include "parallel/nccl_communicator.h"

#include <cstdio>
#include <string>

#if DIFFATTN_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace diffattn::parallel {

#if DIFFATTN_HAVE_NCCL
namespace {

Status nccl_ok(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) return Status::Ok();
  return Internal(std::string(call) + " failed: " + ncclGetErrorString(r) +
                  " (NCCL_DEBUG=WARN in the environment says more)");
}

Status cuda_ok(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return Status::Ok();
  return CudaError(std::string(call) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

#define NCCL_RETURN_IF_ERROR(call) DIFFATTN_RETURN_IF_ERROR(nccl_ok((call), #call))
#define CUDA_RETURN_IF_ERROR(call) DIFFATTN_RETURN_IF_ERROR(cuda_ok((call), #call))

class NcclExchange : public PendingExchange {
 public:
  explicit NcclExchange(cudaEvent_t done) : done_(done) {}
  ~NcclExchange() override { cudaEventDestroy(done_); }
  Status wait(void* stream) override {
    return cuda_ok(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), done_, 0), "cudaStreamWaitEvent");
  }

 private:
  cudaEvent_t done_;
};

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size, int device) : comm_(comm), rank_(rank), size_(size), device_(device) {
    cudaStreamCreateWithFlags(&exchange_stream_, cudaStreamNonBlocking);
  }
  ~NcclCommunicator() override {
    if (exchange_stream_) cudaStreamDestroy(exchange_stream_);
    if (flag_) cudaFree(flag_);
    if (comm_ && !aborted_) ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  DeviceKind device() const override { return DeviceKind::kCuda; }
  std::string_view engine() const override { return "nccl"; }

  Status all_to_all(const void* send, void* recv, std::size_t bytes, void* stream) override {
    DIFFATTN_RETURN_IF_ERROR(usable());
    auto s = static_cast<cudaStream_t>(stream);
    NCCL_RETURN_IF_ERROR(ncclGroupStart());
    for (int j = 0; j < size_; ++j) {
      ncclSend(static_cast<const char*>(send) + j * bytes, bytes, ncclInt8, j, comm_, s);
      ncclRecv(static_cast<char*>(recv) + j * bytes, bytes, ncclInt8, j, comm_, s);
    }
    NCCL_RETURN_IF_ERROR(ncclGroupEnd());
    return Status::Ok();
  }

  Status all_gather(const void* send, void* recv, std::size_t bytes, void* stream) override {
    DIFFATTN_RETURN_IF_ERROR(usable());
    NCCL_RETURN_IF_ERROR(ncclAllGather(send, recv, bytes, ncclInt8, comm_, static_cast<cudaStream_t>(stream)));
    return Status::Ok();
  }

  // The exchange runs on its own stream, after the work already queued on `stream` (which read
  // the buffer it now receives into), so the caller's next attention overlaps it.
  Result<std::unique_ptr<PendingExchange>> start_send_recv(const void* send, int to, void* recv, int from,
                                                           std::size_t bytes, void* stream) override {
    DIFFATTN_RETURN_IF_ERROR(usable());
    if (to < 0 || to >= size_ || from < 0 || from >= size_)
      return InvalidInput("send_recv: peers " + std::to_string(to) + " and " + std::to_string(from) + " must be ranks 0 to " +
                          std::to_string(size_ - 1));
    cudaEvent_t queued, done;
    CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&queued, cudaEventDisableTiming));
    CUDA_RETURN_IF_ERROR(cudaEventRecord(queued, static_cast<cudaStream_t>(stream)));
    CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(exchange_stream_, queued, 0));
    cudaEventDestroy(queued);
    NCCL_RETURN_IF_ERROR(ncclGroupStart());
    ncclSend(send, bytes, ncclInt8, to, comm_, exchange_stream_);
    ncclRecv(recv, bytes, ncclInt8, from, comm_, exchange_stream_);
    NCCL_RETURN_IF_ERROR(ncclGroupEnd());
    CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CUDA_RETURN_IF_ERROR(cudaEventRecord(done, exchange_stream_));
    return std::unique_ptr<PendingExchange>(new NcclExchange(done));
  }

  Status barrier() override {
    DIFFATTN_RETURN_IF_ERROR(usable());
    if (!flag_) CUDA_RETURN_IF_ERROR(cudaMalloc(&flag_, sizeof(int)));
    NCCL_RETURN_IF_ERROR(ncclAllReduce(flag_, flag_, 1, ncclInt32, ncclSum, comm_, exchange_stream_));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(exchange_stream_));
    return Status::Ok();
  }

  Result<std::unique_ptr<Communicator>> split(int color, int key) override {
    DIFFATTN_RETURN_IF_ERROR(usable());
    ncclComm_t sub = nullptr;
    NCCL_RETURN_IF_ERROR(ncclCommSplit(comm_, color, key, &sub, nullptr));
    int rank = 0, size = 0;
    NCCL_RETURN_IF_ERROR(ncclCommUserRank(sub, &rank));
    NCCL_RETURN_IF_ERROR(ncclCommCount(sub, &size));
    return std::unique_ptr<Communicator>(new NcclCommunicator(sub, rank, size, device_));
  }

  // Ends this process's part; peers blocked in NCCL are ended by the launcher (parallel/launcher.h).
  void abort(const std::string& reason) override {
    if (aborted_ || !comm_) return;
    std::fprintf(stderr, "[diffattn] rank %d aborts its NCCL group: %s\n", rank_, reason.c_str());
    ncclCommAbort(comm_);
    aborted_ = true;
  }

 private:
  Status usable() const {
    if (aborted_) return Internal("the NCCL group was aborted after an earlier failure on this rank");
    return Status::Ok();
  }

  ncclComm_t comm_ = nullptr;
  int rank_, size_, device_;
  cudaStream_t exchange_stream_ = nullptr;
  int* flag_ = nullptr;
  bool aborted_ = false;
};

std::string to_hex(const ncclUniqueId& id) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (char c : id.internal) {
    const auto b = static_cast<unsigned char>(c);
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

Result<ncclUniqueId> from_hex(std::string_view hex) {
  ncclUniqueId id{};
  if (hex.size() != 2 * sizeof(id.internal))
    return InvalidInput("an NCCL unique id is " + std::to_string(2 * sizeof(id.internal)) + " hex digits, got " +
                        std::to_string(hex.size()) + "; pass the id rank 0 made (make_nccl_unique_id)");
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < sizeof(id.internal); ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return InvalidInput("the NCCL unique id has a character that is not a hex digit");
    id.internal[i] = static_cast<char>(hi * 16 + lo);
  }
  return id;
}

}  // namespace

bool nccl_built() { return true; }

Result<std::string> make_nccl_unique_id() {
  ncclUniqueId id;
  NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
  return to_hex(id);
}

Result<std::unique_ptr<Communicator>> make_nccl_communicator(std::string_view unique_id, int rank, int size, int device) {
  if (size < 1 || rank < 0 || rank >= size)
    return InvalidInput("NCCL rank " + std::to_string(rank) + " of " + std::to_string(size) + " is not a rank of the group");
  DIFFATTN_ASSIGN_OR_RETURN(ncclUniqueId id, from_hex(unique_id));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  NCCL_RETURN_IF_ERROR(ncclCommInitRank(&comm, size, id, rank));
  return std::unique_ptr<Communicator>(new NcclCommunicator(comm, rank, size, device));
}

#else

namespace {
Status not_built() {
  return Unavailable("this diffattn build has no NCCL (its headers or library were not found when it was built); "
                     "install NCCL with the CUDA toolkit and rebuild, or run sequence parallelism in-process on a CPU");
}
}  // namespace

bool nccl_built() { return false; }
Result<std::string> make_nccl_unique_id() { return not_built(); }
Result<std::unique_ptr<Communicator>> make_nccl_communicator(std::string_view, int, int, int) { return not_built(); }

#endif

}  // namespace diffattn::parallel
