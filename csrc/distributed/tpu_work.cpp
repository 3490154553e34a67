// The c10d::Work of tpu_dist: wraps the transport's work (or a replicated program's), finishes
// the copy back to the device when the transport is done, and completes its future with the
// outputs.
#include <thread>

#include "distributed/process_group_tpu.h"

namespace tpu::distributed {

std::string describe_error(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const c10::Error& err) {
    return err.what_without_backtrace();
  } catch (const std::exception& err) {
    return err.what();
  } catch (...) {
    return "unknown error";
  }
}

namespace {

// Gloo's worker thread keeps its reference to a work for a moment after completing it. If that
// reference were the last, the work's tensors would be freed on the worker thread, and a CPU
// tensor that Python created (an object collective's buffer) would take the GIL there, which
// aborts the process when it happens during interpreter shutdown. So the caller's thread waits
// (briefly) to hold the last reference, and drops it itself.
void release_on_this_thread(c10::intrusive_ptr<c10d::Work>& work) {
  if (!work) return;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (work.use_count() > 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  work.reset();
}

}  // namespace

TpuWork::TpuWork(int rank, c10d::OpType type, std::string name, std::vector<at::Tensor> outputs,
                 c10::intrusive_ptr<c10d::Work> inner, std::function<void()> finish,
                 std::chrono::milliseconds timeout)
    : c10d::Work(rank, type),
      name_(std::move(name)),
      outputs_(std::move(outputs)),
      inner_(std::move(inner)),
      finish_(std::move(finish)),
      timeout_(timeout),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void TpuWork::complete(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!done_) {
    if (inner_) {
      try {
        inner_->wait(timeout);
      } catch (...) {
        std::string reason = describe_error(std::current_exception());
        try {
          C10_THROW_ERROR(DistBackendError,
                          c10::str("tpu_dist: ", name_, " failed on rank ", rank_,
                                   " (process group timeout ", timeout_.count(), " ms): ", reason));
        } catch (...) {
          error_ = std::current_exception();
        }
      }
    }
    if (!error_ && finish_) {
      try {
        finish_();
      } catch (...) {
        error_ = std::current_exception();
      }
    }
    finish_ = nullptr;
    release_on_this_thread(inner_);
    done_ = true;
    if (error_) {
      future_->setError(error_);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  }
  if (error_) std::rethrow_exception(error_);
}

bool TpuWork::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

bool TpuWork::isSuccess() const {
  auto* self = const_cast<TpuWork*>(this);
  std::lock_guard<std::mutex> lock(self->mutex_);
  return done_ && !error_;
}

std::exception_ptr TpuWork::exception() const {
  auto* self = const_cast<TpuWork*>(this);
  std::lock_guard<std::mutex> lock(self->mutex_);
  return error_;
}

int TpuWork::sourceRank() const {
  TORCH_CHECK(false, "tpu_dist: sourceRank() is only defined for recv from any source, which ",
              "tpu_dist does not support");
}

std::vector<at::Tensor> TpuWork::result() { return outputs_; }

bool TpuWork::wait(std::chrono::milliseconds timeout) {
  complete(timeout);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> TpuWork::getFuture() { return future_; }

}  // namespace tpu::distributed
