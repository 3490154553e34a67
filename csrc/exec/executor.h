// The executor: records ATen calls into a pending graph and, at a flush, turns the graph into one
// program (found in the cache, or lowered and compiled), runs it on the storages' buffers and
// installs the results.
//
// One recording path, three flush policies: strict flushes after every op without waiting, debug
// also waits for the op and checks for errors, and defer-and-fuse keeps recording until a sync
// point (a host read, a fallback op, synchronize, a mode change, or the pending-op bound), so a
// whole training step becomes one XLA program. Torch-free: the ATen layer fills an OpCall.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/compiler.h"
#include "lowering/registry.h"
#include "lowering/view_access.h"
#include "runtime/runtime.h"

namespace tpu::cache {
struct Program;
}

namespace tpu::exec {

enum class Mode : uint8_t { Debug = 0, Strict = 1, Fused = 2 };
Mode current_mode();  // per thread, like autocast state
void set_mode(Mode mode);
void set_default_mode(Mode mode);  // for threads that never chose one
// Sets this thread's own mode (-1: none, so the default or backward mode applies) and returns
// the previous one, so that code running on a borrowed thread (the autograd engine's) can put
// back exactly what it found.
int swap_thread_mode(int mode);

// What the autograd engine's threads inherit from the thread that called backward(): its mode
// and its lane (the pending graph it records into), so that a fused forward and its backward
// become one graph and two threads' backward passes never mix. The ATen layer carries it to
// the engine's threads in PyTorch's thread-local state and hands it back through the provider
// (null outside a backward pass).
struct Lane;
struct BackwardContext {
  Mode mode;
  std::shared_ptr<Lane> lane;
};
BackwardContext backward_context();  // the calling thread's
using BackwardContextProvider = const BackwardContext* (*)();
void set_backward_context_provider(BackwardContextProvider provider);

// What the executor knows of a storage's device value. Its own, read and written under its lock
// by the executor's files only (exec/storage_state.h): other layers go through the operations
// below (copy_view, dense_buffer, upload, download, install), which keep the lock, the pending
// graphs and a value's room consistent.
struct StorageState {
  // A 1-D buffer of `dtype`, or nothing before the first write (reads as zeros, which is what
  // PyTorch's uninitialised memory may hold anyway).
  runtime::BufferPtr buffer;
  DType dtype = DType::U8;
  // The graph this storage takes part in, and its parameter slot in the StorageSet being built.
  uint64_t graph_epoch = 0;
  uint64_t set_epoch = 0;
  int32_t set_index = -1;
  // Bytes of the device value past nbytes: a storage written by a program that serves a range
  // of sizes is as long as its bucket, so that the next such program takes it whatever its size.
  int64_t spare_bytes = 0;
  bool sized_to_bucket = false;  // its length is its bucket's (spare_bytes may be 0: a full bucket)
  bool grows = false;            // written by an op whose sizes keep growing (exec/padding.h)
  bool exact_length = false;  // its buffer leaves as it is (to the host, to a collective): no spare
};

// A tensor storage on the device. Its device and byte size are fixed when it is made; its value
// belongs to the executor.
class Storage {
 public:
  Storage(int device, int64_t nbytes) : device(device), nbytes(nbytes) {}
  const int device;
  const int64_t nbytes;
  // Once the tensor storage owning this value is freed, a pending graph never materialises it.
  void mark_freed() { alive_.store(false); }
  bool alive() const { return alive_.load(); }
  int64_t value_bytes() const { return nbytes + state_.spare_bytes; }
  int64_t length_as(DType t) const { return value_bytes() / itemsize(t); }

 private:
  StorageState state_;
  std::atomic<bool> alive_{true};
  friend StorageState& state_of(Storage& storage);
  friend const StorageState& state_of(const Storage& storage);
};
using StoragePtr = std::shared_ptr<Storage>;

// A storage's room past its bytes (exec/padding.h). A storage that stands in for another (a copy
// on another device, a replayed graph's fresh output) gets the same room, so that the programs
// built for the other take it.
struct StorageRoom {
  int64_t spare_bytes = 0;
  bool sized_to_bucket = false;
  bool grows = false;
};
StorageRoom room_of(const Storage& storage);
void give_room(Storage& storage, const StorageRoom& room);  // before its buffer exists
// Moves a dense value without room (an upload of exact length) into a buffer of its bucket's
// `bucket_bytes`, so that the padded programs of that bucket take it: a device copy,
// whose small program is compiled per length, in place of a padded graph compiled per length.
void extend_to_bucket(const StoragePtr& storage, int64_t bucket_bytes);

struct TensorView {
  StoragePtr storage;
  DType dtype = DType::F32;
  lowering::ViewLayout layout;
};

// A number passed to the program at run time: never part of the program's key.
struct RuntimeNumber {
  DType dtype = DType::F64;  // F64, I64, Bool or C128 (f the real part, imag the imaginary)
  double f = 0;
  int64_t i = 0;
  double imag = 0;
};

struct PaddingPlan;

// Where the user's Python code called us: captured cheaply when an op is recorded (the code
// object and the instruction within it, which the provider keeps alive), formatted ("file.py:12")
// only when a message needs it.
struct SourceLocation {
  const void* code = nullptr;
  int instruction = -1;
  bool known() const { return code != nullptr; }
};

struct OpCall {
  std::string name;      // schema name, e.g. "add_"
  std::string overload;  // e.g. "Tensor"
  const lowering::Entry* lowering = nullptr;
  std::vector<lowering::Arg> args;  // Tensor / Number / TensorList args point into inputs / numbers
  std::vector<TensorView> inputs;
  std::vector<RuntimeNumber> numbers;
  std::vector<lowering::Output> outputs;
  std::vector<TensorView> destinations;  // one per output; a null storage skips that output
  // How the call could run at bucket sizes (exec/padding.h), when it can; `padded` says whether
  // this launch runs it so.
  std::shared_ptr<const PaddingPlan> padding;
  bool padded = false;
  uint64_t seed = 0;                     // random lowerings only
  uint64_t offset = 0;
  int device = 0;
  SourceLocation location;  // the user's Python line, recorded in defer-and-fuse for error messages
};

// Captures and formats where the user's Python code called us. Installed by the Python bindings;
// the executor captures in defer-and-fuse, where a graph may fail long after its ops' lines, and
// otherwise only when it is about to raise.
struct LocationProvider {
  SourceLocation (*capture)() = nullptr;
  std::string (*format)(const SourceLocation& where) = nullptr;  // "" if unknown
};
void set_location_provider(LocationProvider provider);
std::string format_location(const SourceLocation& where);

// Called at the end of synchronize(): the ATen layer raises the errors that programs flagged on
// the device (an index out of range) since the last sync point.
using SyncHook = void (*)();
void set_sync_hook(SyncHook hook);

// Raised for errors in a program's compilation or execution, naming the op (and, for ops recorded
// in defer-and-fuse, the user's line; the ATen layer adds the line in the other modes).
class OpError : public std::runtime_error {
 public:
  explicit OpError(const std::string& message, bool out_of_memory = false)
      : std::runtime_error(message), out_of_memory_(out_of_memory) {}
  // The device ran out of memory (PJRT's RESOURCE_EXHAUSTED): torch.OutOfMemoryError upstairs.
  bool out_of_memory() const { return out_of_memory_; }

 private:
  bool out_of_memory_;
};

// Runs (strict, debug) or records (defer-and-fuse) the call.
void run(OpCall call);

// An empty call whose lists keep the room of one this thread's executor has finished with, so that
// describing an op allocates nothing in the common case (five lists per op were a third of the
// heap allocations of recording one).
OpCall reused_call();

// Sync points. flush runs the calling thread's pending ops; materialize runs whichever pending
// graph (any thread's) `storage` takes part in, and waits for one in flight, before its buffer is
// read or replaced from outside the executor.
void flush(const char* reason);
void materialize(const Storage& storage);
void set_max_pending_ops(int64_t ops);

// dst := src (any view, any dtype, same device): the copy kernel's device part.
void copy_view(const TensorView& src, const TensorView& dst);

// A buffer holding the view's elements densely in row-major order, in the view's dtype.
runtime::BufferPtr dense_buffer(const TensorView& view);

// Host transfers, the only way a value crosses between host memory and a storage. `host` holds
// the view's elements densely in row-major order: upload converts and lays them out on the
// device (a whole dense storage just takes a new buffer, with no program); download writes them
// there in `dtype`.
void upload(const TensorView& target, const void* host, DType host_dtype);
void download(const TensorView& view, DType dtype, void* host);
// Writes elements [offset, offset + the view's size) of a 1-D device buffer (a collective's
// result) into the view; a result that is the whole storage becomes its buffer, with no copy.
void install(const TensorView& target, const runtime::BufferPtr& flat, int64_t offset);
// Copies the bytes both storages hold (a resized storage keeps them; the rest reads as zeros).
void copy_shared_bytes(const StoragePtr& from, const StoragePtr& to);

// Runs every thread's pending ops, then waits for every program launched on `device` (-1: all
// devices); raises their errors.
void synchronize(int device);

// Events: a marker of all work issued on `device` so far (pending ops are launched first), and
// whether the device has nothing pending or running.
class Marker;
std::shared_ptr<Marker> record_marker(int device, bool timing);
bool idle(int device);

// A fused graph kept for replay without recording: torch.compile runs a graph once through the
// recording path (begin_capture, its ops, end_capture), then runs the same program on the
// storages of later calls' arguments. Graphs with random ops are not captured (every run must
// draw new numbers), nor graphs that were split by a sync point.
struct Capture {
  struct StorageState {
    bool had_buffer;
    DType dtype;
    int64_t value_bytes;
  };
  std::shared_ptr<const cache::Program> program;
  std::vector<StoragePtr> storages;   // the program's storage set at capture, in order
  std::vector<StorageState> states;   // what the program was built for, per storage
  std::vector<RuntimeNumber> numbers;  // fixed by the graph: its scalars are its own constants
  std::vector<int64_t> offsets;        // likewise its views' offsets into their storages
  int device = 0;
  std::string blame;  // the graph's last op, for error messages
  std::string trace_name, trace_ops;  // what a profiler trace calls its runs
};
// Flushes, then captures the next graph this thread records. `sizes_vary`: the graph was traced
// with symbolic sizes that have changed since its first call, so its program pads them to their
// buckets at once (exec/padding.h). `graph`: a number that names the graph across its calls (0:
// none); its ops then learn which sizes change from that graph's earlier calls alone, op by op.
void begin_capture(bool sizes_vary, uint64_t graph = 0);
// Flushes; the captured graph, or null when it cannot be replayed.
std::shared_ptr<Capture> end_capture();
// Runs the captured program with `storages[i]` in place of `capture.storages[i]` (null for a
// storage the program neither reads nor writes). False, having run nothing, when a storage's
// state differs from what the program was built for; the caller records the graph instead.
bool replay(const Capture& capture, const std::vector<StoragePtr>& storages);

struct Counters {
  int64_t ops = 0;
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
  double compile_seconds = 0;
  int64_t executions = 0;
  int64_t flushes = 0;  // defer-and-fuse graphs run
  int64_t program_outputs = 0;  // storages materialised by programs
  int64_t replays = 0;          // captured graphs run again without recording
  std::map<std::string, int64_t> flush_reasons;
  CompileCounters compile;  // per kind of program (compiler.h)
};
Counters counters();
void reset_counters();

}  // namespace tpu::exec
