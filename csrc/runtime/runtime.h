// The PJRT binding: one process-wide client over one plugin, its devices, buffers, executables.
//
// Everything here is torch-free. Every PJRT error becomes a PjrtError carrying PJRT's message and
// code; a plugin that cannot be found or loaded becomes a NoPluginError saying how to get one.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "hlo/types.h"

struct PJRT_Api;
struct PJRT_Buffer;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_DeviceDescription;
struct PJRT_Error;
struct PJRT_Event;
struct PJRT_LoadedExecutable;

namespace tpu::runtime {

class PjrtError : public std::runtime_error {
 public:
  PjrtError(const std::string& message, int code) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }
  bool out_of_memory() const { return code_ == 8; }  // RESOURCE_EXHAUSTED

 private:
  int code_;
};

class NoPluginError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An owned PJRT buffer: one dense array on one device. Destroying it releases device memory once
// every program already enqueued on it has finished (PJRT tracks the uses).
// Bytes held by live buffers on a device: what a program's results, inputs and temporaries
// really occupy, as opposed to the storages tensors have reserved.
struct DeviceMemory {
  int64_t current = 0;
  int64_t peak = 0;
};
DeviceMemory device_memory(int device);
void reset_device_memory_peak(int device);

class Buffer {
 public:
  Buffer(PJRT_Buffer* raw, int device, TensorType type);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  PJRT_Buffer* raw() const { return raw_; }
  int device() const { return device_; }
  const TensorType& type() const { return type_; }
  int64_t nbytes() const { return numel(type_.dims) * itemsize(type_.dtype); }
  // Its memory went to a program's result (donation): it holds nothing from now on.
  void given_away() const;

 private:
  PJRT_Buffer* raw_;
  int device_;
  TensorType type_;
  mutable std::atomic<bool> given_away_{false};
};
using BufferPtr = std::shared_ptr<Buffer>;

class Executable {
 public:
  explicit Executable(PJRT_LoadedExecutable* raw) : raw_(raw) {}
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;
  PJRT_LoadedExecutable* raw() const { return raw_; }
  // PJRT's own serialization, for the persistent cache. Empty when the plugin cannot serialize.
  std::string serialize() const;

 private:
  PJRT_LoadedExecutable* raw_;
};
using ExecutablePtr = std::shared_ptr<Executable>;

struct ExecuteResult {
  std::vector<BufferPtr> outputs;
  PJRT_Event* done = nullptr;  // owned by the caller: wait() or release() it
};

// Where to look for a plugin, in order. The Python layer fills this (it knows where pip put
// libtpu, JAX's CUDA plugin and XLA's CPU plugin) before the first device use.
struct PluginCandidate {
  std::string kind;  // "override", "tpu", "cuda", "cpu": decides the client create options
  std::string path;
};
void set_plugin_candidates(std::vector<PluginCandidate> candidates);

// A process forked after the device was first used cannot use it (CUDA refuses the same way):
// throws a std::runtime_error that says to use the spawn start method.
void raise_if_forked_child();
bool in_forked_child();

class Client {
 public:
  // The process-wide client, created on first use. Throws NoPluginError when no plugin is found.
  static Client& get();
  // Whether a client exists or could be created, without throwing.
  static bool available();
  // Why the last attempt to create the client failed ("" when it did not).
  static std::string unavailable_reason();

  int device_count() const { return static_cast<int>(devices_.size()); }
  const std::string& platform() const { return platform_; }
  const std::string& platform_version() const { return platform_version_; }
  const std::string& plugin_path() const { return plugin_path_; }
  // Whether a buffer is plain row-major memory that a program may take as a parameter of any
  // shape with its element type and count. True on the CPU plugin, which checks only byte sizes;
  // TPU buffers are tiled by shape, so there a storage's buffer keeps its one flat shape.
  bool buffers_reshape_freely() const { return platform_ == "cpu"; }
  std::string device_kind(int device) const;
  // The plugin's allocator statistics; -1 where it reports none (the CPU plugin reports none).
  struct AllocatorStats {
    int64_t bytes_in_use = -1;
    int64_t bytes_limit = -1;
  };
  AllocatorStats allocator_stats(int device) const;
  // PJRT's global id of a local device: what a device assignment names.
  int64_t device_id(int device) const;
  int api_major() const;
  int api_minor() const;
  // The serialized CompileOptionsProto every compile() passes: part of the compilation cache's key.
  const std::string& compile_options() const { return compile_options_; }

  BufferPtr from_host(const void* data, const TensorType& type, int device);
  // Blocks until `buffer`'s bytes are in `dst` (which holds buffer.nbytes()).
  void to_host(const Buffer& buffer, void* dst);
  BufferPtr copy_to_device(const Buffer& buffer, int device);

  ExecutablePtr compile(const std::string& mlir_text);
  // Compiled with quick_compile_overrides(): cheap to build, slower to run. A plugin that rejects
  // the overrides gets the full compile, now and from then on (quick_compiles() turns false), and
  // so does every compile with TORCH_TPU_QUICK_COMPILE=0.
  ExecutablePtr compile_quick(const std::string& mlir_text);
  bool quick_compiles() const { return quick_compiles_; }
  ExecutablePtr deserialize(const std::string& bytes);
  // A program with one replica per device of `devices` (local indices, in replica order), for
  // collectives between them; not portable, so not part of the persistent cache.
  ExecutablePtr compile_replicated(const std::string& mlir_text, const std::vector<int>& devices);
  // A program compiled with an argument aliased to a result (tf.aliasing_output) reuses that
  // argument's memory for the result, and the argument is gone afterwards, unless its index is
  // among `keep_arguments` (PJRT then copies). Arguments given away count no more as held memory.
  ExecuteResult execute(const Executable& executable, int device,
                        const std::vector<const Buffer*>& arguments,
                        const std::vector<TensorType>& output_types,
                        const std::vector<int64_t>& keep_arguments = {});
  // Host time spent inside the plugin's execute calls since the last reset: the part of an op's
  // dispatch cost that belongs to the plugin (the CPU plugin runs a tiny program inline).
  static double execute_call_seconds();
  static void reset_execute_call_seconds();
  // Runs a compile_replicated program: arguments[i] on devices[i]; one result per replica.
  std::vector<ExecuteResult> execute_replicated(const Executable& executable, const std::vector<int>& devices,
                                                const std::vector<std::vector<const Buffer*>>& arguments,
                                                const std::vector<TensorType>& output_types);

  // Events: wait blocks, releases the event and throws the error of the work it tracked; await
  // does the same but keeps the event; on_ready calls `callback` once it is ready (perhaps at
  // once, on this thread), and the callback owns the error it receives (discard() it).
  void wait(PJRT_Event* event);
  void await(PJRT_Event* event);
  void on_ready(PJRT_Event* event, void (*callback)(PJRT_Error* error, void* arg), void* arg);
  void discard(PJRT_Error* error) const;
  bool ready(PJRT_Event* event);
  void release(PJRT_Event* event);
  // Blocks until `buffer` is computed; throws the error of the program that made it.
  void wait_ready(const Buffer& buffer);

  const PJRT_Api* api() const { return api_; }
  void check(PJRT_Error* error, const char* what) const;

 private:
  Client() = default;
  void load();
  PJRT_DeviceDescription* description(int device) const;
  ExecutablePtr compile_with(const std::string& mlir_text, const std::string& serialized_options);

  const PJRT_Api* api_ = nullptr;
  PJRT_Client* client_ = nullptr;
  std::vector<PJRT_Device*> devices_;
  std::string platform_;
  std::string platform_version_;
  std::string plugin_path_;
  std::string compile_options_;
  std::string quick_compile_options_;
  std::atomic<bool> quick_compiles_{true};
};

}  // namespace tpu::runtime
