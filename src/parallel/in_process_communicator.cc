#include "parallel/in_process_communicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "parallel/device_memory.h"

namespace diffattn::parallel {
namespace {

// What one rank brought to a collective.
struct Deposit {
  const void* send = nullptr;
  int peer = -1;  // send_recv: the rank this one sends to
  int color = 0, key = 0;  // split
};

// The state the ranks of one group share. A collective is two rendezvous: at the first every rank
// has deposited its buffers, between them each rank copies what is its own, at the second every
// rank has finished reading, so no buffer is reused while another rank still reads it.
class Group : public std::enable_shared_from_this<Group> {
 public:
  Group(int size, std::chrono::milliseconds timeout) : size_(size), timeout_(timeout), deposits_(size), splits_(size) {}

  int size() const { return size_; }

  // Waits until all ranks have arrived; the last to arrive runs `on_complete` under the lock.
  Status rendezvous(int rank, const std::function<void()>& on_complete = {}) { return meet(rank, on_complete, false); }

  // The second rendezvous of a collective whose first one completed: every rank is then between the
  // two, reading the others' buffers, and reaches this one whatever fails meanwhile. So it waits for
  // all of them even in an aborted group (a rank that left early could free a buffer a peer still
  // reads), and only then reports the abort.
  Status drain(int rank) {
    Status met = meet(rank, {}, true);
    if (!met.ok()) return met;
    std::lock_guard lock(mu_);
    return failure_ ? failed_status() : Status::Ok();
  }

  void deposit(int rank, Deposit d) {
    std::lock_guard lock(mu_);
    deposits_[rank] = d;
  }
  // Read between the two rendezvous, when no rank writes deposits.
  const Deposit& deposit_of(int rank) const { return deposits_[rank]; }

  // Reaches every group split from the same world: a rank waiting in another subgroup stops too.
  void abort(const std::string& reason) {
    std::vector<std::shared_ptr<Group>> related;
    {
      std::lock_guard lock(mu_);
      if (failure_) return;
      failure_ = reason;
      cv_.notify_all();
      if (auto p = parent_.lock()) related.push_back(std::move(p));
      for (const auto& c : children_)
        if (auto g = c.lock()) related.push_back(std::move(g));
    }
    for (const auto& g : related) g->abort(reason);
  }

  // Forms the groups of a split from every rank's (color, key); runs under the lock.
  void form_split_groups() {
    std::vector<std::tuple<int, int, int>> order;  // color, key, rank
    for (int r = 0; r < size_; ++r) order.emplace_back(deposits_[r].color, deposits_[r].key, r);
    std::sort(order.begin(), order.end());
    for (std::size_t i = 0; i < order.size();) {
      std::size_t j = i;
      while (j < order.size() && std::get<0>(order[j]) == std::get<0>(order[i])) ++j;
      auto group = std::make_shared<Group>(static_cast<int>(j - i), timeout_);
      group->parent_ = weak_from_this();
      children_.push_back(group);
      for (std::size_t k = i; k < j; ++k) splits_[std::get<2>(order[k])] = {group, static_cast<int>(k - i)};
      i = j;
    }
  }
  std::pair<std::shared_ptr<Group>, int> split_result(int rank) {
    std::lock_guard lock(mu_);
    return splits_[rank];
  }

 private:
  // `through_failure`: wait for every rank even after an abort (drain).
  Status meet(int rank, const std::function<void()>& on_complete, bool through_failure) {
    std::unique_lock lock(mu_);
    if (failure_ && !through_failure) return failed_status();
    const std::uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      if (on_complete) on_complete();
      cv_.notify_all();
      return Status::Ok();
    }
    const bool done = cv_.wait_for(lock, timeout_, [&] {
      return generation_ != generation || (!through_failure && failure_.has_value());
    });
    // A rendezvous that completed stands even if a rank failed right after it.
    if (generation_ != generation) return Status::Ok();
    if (failure_ && !through_failure) return failed_status();
    if (!done) {
      if (!failure_)
        failure_ = "rank " + std::to_string(rank) + " waited " + std::to_string(timeout_.count()) +
                   " ms for the other ranks of its group at a collective: a rank stopped or took another path";
      cv_.notify_all();
      return failed_status();
    }
    return Status::Ok();
  }

  Status failed_status() const {
    return Internal("in-process communicator: the group was aborted: " + *failure_);
  }

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  std::optional<std::string> failure_;
  std::vector<Deposit> deposits_;
  std::vector<std::pair<std::shared_ptr<Group>, int>> splits_;
  std::weak_ptr<Group> parent_;
  std::vector<std::weak_ptr<Group>> children_;
};

class InProcessExchange : public PendingExchange {
 public:
  explicit InProcessExchange(std::future<Status> done) : done_(std::move(done)) {}
  Status wait(void*) override { return done_.valid() ? done_.get() : Status::Ok(); }

 private:
  std::future<Status> done_;
};

class InProcessCommunicator : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<Group> group, int rank, DeviceKind device)
      : group_(std::move(group)), rank_(rank), device_(device) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  DeviceKind device() const override { return device_; }
  std::string_view engine() const override { return "in-process"; }

  Status all_to_all(const void* send, void* recv, std::size_t bytes, void* stream) override {
    return collective(send, -1, stream, [&] {
      for (int j = 0; j < size(); ++j)
        DIFFATTN_RETURN_IF_ERROR(copy(static_cast<char*>(recv) + j * bytes,
                                      static_cast<const char*>(group_->deposit_of(j).send) + rank_ * bytes, bytes));
      return Status::Ok();
    });
  }

  Status all_gather(const void* send, void* recv, std::size_t bytes, void* stream) override {
    return collective(send, -1, stream, [&] {
      for (int j = 0; j < size(); ++j)
        DIFFATTN_RETURN_IF_ERROR(copy(static_cast<char*>(recv) + j * bytes, group_->deposit_of(j).send, bytes));
      return Status::Ok();
    });
  }

  Result<std::unique_ptr<PendingExchange>> start_send_recv(const void* send, int to, void* recv, int from,
                                                           std::size_t bytes, void* stream) override {
    DIFFATTN_RETURN_IF_ERROR(check_peer(to, "to"));
    DIFFATTN_RETURN_IF_ERROR(check_peer(from, "from"));
    // The exchange runs on its own thread so that the caller's attention overlaps it.
    // The send buffer is ready once the caller's queued work is; the copy itself is synchronous.
    DIFFATTN_RETURN_IF_ERROR(synchronize(device_, stream));
    auto done = std::async(std::launch::async, [this, send, to, recv, from, bytes] {
      return collective(send, to, nullptr, [&]() -> Status {
        const Deposit& src = group_->deposit_of(from);
        if (src.peer != rank_) {
          return InvalidInput("send_recv: rank " + std::to_string(rank_) + " receives from rank " + std::to_string(from) +
                              ", which sends to rank " + std::to_string(src.peer) + "; every rank must name a matching peer");
        }
        return copy(recv, src.send, bytes);
      });
    });
    return std::unique_ptr<PendingExchange>(new InProcessExchange(std::move(done)));
  }

  Status barrier() override { return group_->rendezvous(rank_); }

  Result<std::unique_ptr<Communicator>> split(int color, int key) override {
    group_->deposit(rank_, Deposit{.color = color, .key = key});
    DIFFATTN_RETURN_IF_ERROR(group_->rendezvous(rank_, [this] { group_->form_split_groups(); }));
    auto [group, rank] = group_->split_result(rank_);
    // The second rendezvous keeps the deposits until every rank has read its group.
    DIFFATTN_RETURN_IF_ERROR(group_->rendezvous(rank_));
    return std::unique_ptr<Communicator>(new InProcessCommunicator(std::move(group), rank, device_));
  }

  void abort(const std::string& reason) override { group_->abort("rank " + std::to_string(rank_) + " failed: " + reason); }

 private:
  // Host memcpy, or a device copy finished before it returns (the reader's peers may reuse the source next).
  Status copy(void* dst, const void* src, std::size_t bytes) const {
    if (bytes == 0) return Status::Ok();
    if (device_ == DeviceKind::kCpu) {
      std::memcpy(dst, src, bytes);
      return Status::Ok();
    }
    DIFFATTN_RETURN_IF_ERROR(copy_rows(dst, bytes, src, bytes, bytes, 1, device_, nullptr));
    return synchronize(device_, nullptr);
  }

  Status check_peer(int peer, const char* what) const {
    if (peer >= 0 && peer < size()) return Status::Ok();
    return InvalidInput(std::string("send_recv: '") + what + "' rank " + std::to_string(peer) + " is outside the group of " +
                        std::to_string(size()) + " ranks");
  }

  // Deposit, wait for all, copy this rank's share, wait until every rank has copied its share.
  Status collective(const void* send, int peer, void* stream, const std::function<Status()>& read_mine) {
    DIFFATTN_RETURN_IF_ERROR(synchronize(device_, stream));  // the peers read `send` as soon as all arrive
    group_->deposit(rank_, Deposit{.send = send, .peer = peer});
    DIFFATTN_RETURN_IF_ERROR(group_->rendezvous(rank_));
    Status read = read_mine();
    if (!read.ok()) group_->abort(read.message());
    DIFFATTN_RETURN_IF_ERROR(group_->drain(rank_));
    return read;
  }

  std::shared_ptr<Group> group_;
  int rank_;
  DeviceKind device_;
};

}  // namespace

Result<std::vector<std::unique_ptr<Communicator>>> make_in_process_group(int size, std::chrono::milliseconds timeout,
                                                                       DeviceKind device) {
  if (size < 1 || size > 1024)
    return InvalidInput("an in-process group needs 1 to 1024 ranks, got " + std::to_string(size));
  if (timeout.count() <= 0) return InvalidInput("an in-process group needs a positive timeout");
  auto group = std::make_shared<Group>(size, timeout);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<InProcessCommunicator>(group, r, device));
  return ranks;
}

}  // namespace diffattn::parallel
