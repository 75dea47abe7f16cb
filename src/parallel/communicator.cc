#include "parallel/communicator.h"

namespace diffattn::parallel {

Status send_recv(Communicator& comm, const void* send, int to, void* recv, int from, std::size_t bytes, void* stream) {
  DIFFATTN_ASSIGN_OR_RETURN(std::unique_ptr<PendingExchange> pending,
                            comm.start_send_recv(send, to, recv, from, bytes, stream));
  return pending->wait(stream);
}

}  // namespace diffattn::parallel
