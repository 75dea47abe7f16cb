#pragma once
// Ranks that exchange buffers: the collectives sequence parallelism needs, behind one interface
// with two engines (in-process threads for tests and CPUs, NCCL for GPUs). Every rank of a group
// calls the same collectives in the same order; a failed rank aborts the group so that the others
// return its reason instead of waiting for it.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "diffattn/status.h"
#include "diffattn/tensor.h"

namespace diffattn::parallel {

// One send/receive in flight (a ring step's K/V block).
class PendingExchange {
 public:
  virtual ~PendingExchange() = default;
  // After this returns, work on `stream` (CUDA) or the calling thread (CPU) sees the received bytes
  // and may reuse the send buffer.
  virtual Status wait(void* stream) = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Where the buffers passed to the collectives live.
  virtual DeviceKind device() const = 0;
  virtual std::string_view engine() const = 0;  // "in-process" or "nccl"

  // Block j of `send` goes to rank j; block i of `recv` comes from rank i. Blocks are
  // `bytes_per_rank` long; `stream` is a cudaStream_t for device buffers, ignored on the host.
  virtual Status all_to_all(const void* send, void* recv, std::size_t bytes_per_rank, void* stream) = 0;
  // `recv` receives every rank's `bytes` in rank order.
  virtual Status all_gather(const void* send, void* recv, std::size_t bytes, void* stream) = 0;
  // Every rank at once sends `bytes` to `to` and receives as many from `from` (a ring shift).
  // Returns when the exchange has started; wait on the result before touching either buffer.
  virtual Result<std::unique_ptr<PendingExchange>> start_send_recv(const void* send, int to, void* recv, int from,
                                                                   std::size_t bytes, void* stream) = 0;
  virtual Status barrier() = 0;
  // Ranks passing the same `color` form a new group, ordered by `key` then by rank (MPI_Comm_split).
  virtual Result<std::unique_ptr<Communicator>> split(int color, int key) = 0;
  // Marks the group failed: every rank's waiting and later collectives return `reason`.
  virtual void abort(const std::string& reason) = 0;
};

// start_send_recv followed by wait.
Status send_recv(Communicator& comm, const void* send, int to, void* recv, int from, std::size_t bytes, void* stream);

}  // namespace diffattn::parallel
