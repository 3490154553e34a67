#include "runtime/runtime.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "runtime/compile_options.h"
#include "runtime/pjrt_abi.h"

namespace tpu::runtime {

namespace {

std::mutex g_mutex;
std::vector<PluginCandidate> g_candidates;
Client* g_client = nullptr;
std::string g_failure;
// Set in a child forked after the client existed. The child has the parent's memory but not its
// threads or its device connection: any use would hang, so every entry raises instead, and the
// buffers the child inherited are left alone rather than destroyed through the parent's client.
std::atomic<bool> g_forked_child{false};

void mark_forked_child() {
  g_forked_child = true;
  g_client = nullptr;
}

template <typename T>
T make_args() {
  T args;
  std::memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  return args;
}

PJRT_Buffer_Type to_pjrt(DType dtype) {
  switch (dtype) {
    case DType::Bool: return PJRT_Buffer_Type_PRED;
    case DType::I8: return PJRT_Buffer_Type_S8;
    case DType::I16: return PJRT_Buffer_Type_S16;
    case DType::I32: return PJRT_Buffer_Type_S32;
    case DType::I64: return PJRT_Buffer_Type_S64;
    case DType::U8: return PJRT_Buffer_Type_U8;
    case DType::U16: return PJRT_Buffer_Type_U16;
    case DType::U32: return PJRT_Buffer_Type_U32;
    case DType::U64: return PJRT_Buffer_Type_U64;
    case DType::F16: return PJRT_Buffer_Type_F16;
    case DType::BF16: return PJRT_Buffer_Type_BF16;
    case DType::F32: return PJRT_Buffer_Type_F32;
    case DType::F64: return PJRT_Buffer_Type_F64;
    case DType::C64: return PJRT_Buffer_Type_C64;
    case DType::C128: return PJRT_Buffer_Type_C128;
  }
  return PJRT_Buffer_Type_INVALID;
}

const char* kInstallHint =
    "No PJRT plugin could be loaded for the 'tpu' device. Install one: `pip install xla-cpu-pjrt` "
    "(XLA's CPU plugin, runs anywhere), `pip install libtpu` on a Cloud TPU, or "
    "`pip install jax-cuda12-pjrt` on an NVIDIA GPU; or point TORCH_TPU_PJRT_PLUGIN at a plugin's "
    ".so file.";

PJRT_NamedValue named_option(const char* name, PJRT_NamedValue_Type type) {
  PJRT_NamedValue v;
  std::memset(&v, 0, sizeof v);
  v.struct_size = sizeof v;
  v.name = name;
  v.name_size = std::strlen(name);
  v.type = type;
  v.value_size = 1;
  return v;
}

PJRT_NamedValue int_option(const char* name, int64_t value) {
  PJRT_NamedValue v = named_option(name, PJRT_NamedValue_kInt64);
  v.int64_value = value;
  return v;
}

PJRT_NamedValue bool_option(const char* name, bool value) {
  PJRT_NamedValue v = named_option(name, PJRT_NamedValue_kBool);
  v.bool_value = value;
  return v;
}

// XLA logs its start-up chatter straight to stderr before anyone could configure its logging;
// hide it unless TORCH_TPU_PLUGIN_LOGS=1. Errors still reach us through PJRT_Error.
class QuietStderr {
 public:
  QuietStderr() {
    const char* keep = std::getenv("TORCH_TPU_PLUGIN_LOGS");
    if (keep && *keep && *keep != '0') return;
    std::fflush(stderr);
    saved_ = dup(2);
    int devnull = open("/dev/null", O_WRONLY);
    if (saved_ >= 0 && devnull >= 0) dup2(devnull, 2);
    if (devnull >= 0) close(devnull);
  }
  ~QuietStderr() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
  }

 private:
  int saved_ = -1;
};

bool looks_like_cpu(const PluginCandidate& c) {
  return c.kind == "cpu" || (c.kind == "override" && c.path.find("cpu") != std::string::npos);
}
bool looks_like_cuda(const PluginCandidate& c) {
  return c.kind == "cuda" || (c.kind == "override" && (c.path.find("cuda") != std::string::npos ||
                                                       c.path.find("gpu") != std::string::npos));
}

}  // namespace

void set_plugin_candidates(std::vector<PluginCandidate> candidates) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_candidates = std::move(candidates);
}

void Client::check(PJRT_Error* error, const char* what) const {
  if (!error) return;
  auto message_args = make_args<PJRT_Error_Message_Args>();
  message_args.error = error;
  api_->PJRT_Error_Message(&message_args);
  std::string message(message_args.message, message_args.message_size);
  auto code_args = make_args<PJRT_Error_GetCode_Args>();
  code_args.error = error;
  int code = 2;
  if (!api_->PJRT_Error_GetCode(&code_args)) code = code_args.code;
  auto destroy_args = make_args<PJRT_Error_Destroy_Args>();
  destroy_args.error = error;
  api_->PJRT_Error_Destroy(&destroy_args);
  throw PjrtError(std::string(what) + " failed: " + message, code);
}

const char* const kForkedChildMessage =
    "Cannot re-initialize the tpu device in a forked subprocess: the parent process had already used it, and "
      "a forked child cannot share its device connection. To use the tpu device with multiprocessing, use the "
      "'spawn' start method (multiprocessing.set_start_method('spawn'), torch.multiprocessing.spawn, or "
      "DataLoader(..., multiprocessing_context='spawn')), or keep the child's work on the CPU.";

void raise_if_forked_child() {
  if (g_forked_child.load(std::memory_order_relaxed)) throw std::runtime_error(kForkedChildMessage);
}

bool in_forked_child() { return g_forked_child.load(); }

Client& Client::get() {
  raise_if_forked_child();  // before the lock: the parent may have forked while holding it
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_client) return *g_client;
  if (!g_failure.empty()) throw NoPluginError(g_failure);
  auto* client = new Client();
  try {
    client->load();
  } catch (const std::exception& e) {
    delete client;
    g_failure = e.what();
    throw NoPluginError(g_failure);
  }
  // Never destroyed: buffers owned by Python objects may outlive static destructors at exit.
  g_client = client;
  static const int at_fork = pthread_atfork(nullptr, nullptr, &mark_forked_child);
  (void)at_fork;
  return *g_client;
}

bool Client::available() {
  try {
    get();
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

std::string Client::unavailable_reason() {
  if (g_forked_child) return kForkedChildMessage;
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_failure;
}

void Client::load() {
  if (g_candidates.empty()) throw NoPluginError(kInstallHint);
  std::string tried;
  for (const auto& candidate : g_candidates) {
    void* handle = dlopen(candidate.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      tried += "\n  " + candidate.path + ": " + dlerror();
      if (candidate.kind == "override") break;  // an explicit choice must not silently fall through
      continue;
    }
    auto get_api = reinterpret_cast<GetPjrtApiFn>(dlsym(handle, "GetPjrtApi"));
    if (!get_api) {
      tried += "\n  " + candidate.path + ": no GetPjrtApi symbol (not a PJRT plugin)";
      if (candidate.kind == "override") break;
      continue;
    }
    const PJRT_Api* api = get_api();
    int major = api->pjrt_api_version.major_version;
    int minor = api->pjrt_api_version.minor_version;
    if (major != kPjrtMajor || minor < kMinPjrtMinor ||
        api->struct_size < offsetof(PJRT_Api, PJRT_Buffer_ReadyEvent) + sizeof(void*)) {
      tried += "\n  " + candidate.path + ": PJRT C API " + std::to_string(major) + "." +
               std::to_string(minor) + " is not supported (need " + std::to_string(kPjrtMajor) +
               "." + std::to_string(kMinPjrtMinor) + " or a newer 0.x)";
      if (candidate.kind == "override") break;
      continue;
    }
    api_ = api;
    plugin_path_ = candidate.path;
    QuietStderr quiet;
    if (api_->PJRT_Plugin_Initialize) {
      auto init = make_args<PJRT_Plugin_Initialize_Args>();
      check(api_->PJRT_Plugin_Initialize(&init), "PJRT_Plugin_Initialize");
    }
    std::vector<PJRT_NamedValue> options;
    if (looks_like_cpu(candidate)) {
      const char* env = std::getenv("TORCH_TPU_CPU_DEVICES");
      int64_t count = env ? std::atoll(env) : 2;
      options.push_back(int_option("cpu_device_count", count > 0 ? count : 2));
    } else if (looks_like_cuda(candidate)) {
      // Allocate on demand, as PyTorch's caching allocator does, instead of claiming most of the GPU.
      options.push_back(bool_option("preallocate", false));
    }
    auto create = make_args<PJRT_Client_Create_Args>();
    create.create_options = options.data();
    create.num_options = options.size();
    check(api_->PJRT_Client_Create(&create), "PJRT_Client_Create");
    client_ = create.client;

    auto name = make_args<PJRT_Client_PlatformName_Args>();
    name.client = client_;
    check(api_->PJRT_Client_PlatformName(&name), "PJRT_Client_PlatformName");
    platform_.assign(name.platform_name, name.platform_name_size);
    auto version = make_args<PJRT_Client_PlatformVersion_Args>();
    version.client = client_;
    check(api_->PJRT_Client_PlatformVersion(&version), "PJRT_Client_PlatformVersion");
    platform_version_.assign(version.platform_version, version.platform_version_size);

    auto devices = make_args<PJRT_Client_AddressableDevices_Args>();
    devices.client = client_;
    check(api_->PJRT_Client_AddressableDevices(&devices), "PJRT_Client_AddressableDevices");
    devices_.assign(devices.addressable_devices,
                    devices.addressable_devices + devices.num_addressable_devices);
    if (devices_.empty()) throw NoPluginError(candidate.path + ": the plugin reports no devices");
    compile_options_ = encode_compile_options(CompileOptions{});
    CompileOptions quick;
    quick.overrides = quick_compile_overrides();
    quick_compile_options_ = encode_compile_options(quick);
    const char* quick_env = std::getenv("TORCH_TPU_QUICK_COMPILE");
    if (quick_env && std::string(quick_env) == "0") quick_compiles_ = false;
    return;
  }
  throw NoPluginError(std::string(kInstallHint) + "\nTried:" + tried);
}

int Client::api_major() const { return api_->pjrt_api_version.major_version; }
int Client::api_minor() const { return api_->pjrt_api_version.minor_version; }

PJRT_DeviceDescription* Client::description(int device) const {
  auto desc = make_args<PJRT_Device_GetDescription_Args>();
  desc.device = devices_.at(device);
  check(api_->PJRT_Device_GetDescription(&desc), "PJRT_Device_GetDescription");
  return desc.device_description;
}

std::string Client::device_kind(int device) const {
  auto kind = make_args<PJRT_DeviceDescription_Kind_Args>();
  kind.device_description = description(device);
  check(api_->PJRT_DeviceDescription_Kind(&kind), "PJRT_DeviceDescription_Kind");
  return std::string(kind.device_kind, kind.device_kind_size);
}

Client::AllocatorStats Client::allocator_stats(int device) const {
  AllocatorStats memory;
  if (device < 0 || device >= device_count() || !api_->PJRT_Device_MemoryStats) return memory;
  auto args = make_args<PJRT_Device_MemoryStats_Args>();
  args.device = devices_[device];
  PJRT_Error* error = api_->PJRT_Device_MemoryStats(&args);
  if (error) {  // the CPU plugin has no allocator statistics
    discard(error);
    return memory;
  }
  memory.bytes_in_use = args.bytes_in_use;
  if (args.bytes_limit_is_set) memory.bytes_limit = args.bytes_limit;
  return memory;
}

int64_t Client::device_id(int device) const {
  auto id = make_args<PJRT_DeviceDescription_Id_Args>();
  id.device_description = description(device);
  check(api_->PJRT_DeviceDescription_Id(&id), "PJRT_DeviceDescription_Id");
  return id.id;
}

namespace {
// Destructors cannot throw: an error while releasing is dropped.
void discard(PJRT_Error* error) {
  if (!error) return;
  auto destroy = make_args<PJRT_Error_Destroy_Args>();
  destroy.error = error;
  g_client->api()->PJRT_Error_Destroy(&destroy);
}
}  // namespace

namespace {
constexpr int kMaxDevices = 256;
std::atomic<int64_t> g_device_bytes[kMaxDevices];
std::atomic<int64_t> g_device_peak[kMaxDevices];

void account(int device, int64_t delta) {
  if (device < 0 || device >= kMaxDevices) return;
  int64_t now = g_device_bytes[device] += delta;
  int64_t peak = g_device_peak[device].load();
  while (now > peak && !g_device_peak[device].compare_exchange_weak(peak, now)) {
  }
}
}  // namespace

DeviceMemory device_memory(int device) {
  if (device < 0 || device >= kMaxDevices) return {};
  return {g_device_bytes[device].load(), g_device_peak[device].load()};
}

void reset_device_memory_peak(int device) {
  if (device >= 0 && device < kMaxDevices) g_device_peak[device] = g_device_bytes[device].load();
}

Buffer::Buffer(PJRT_Buffer* raw, int device, TensorType type)
    : raw_(raw), device_(device), type_(std::move(type)) {
  account(device_, nbytes());
}

void Buffer::given_away() const {
  if (!given_away_.exchange(true)) account(device_, -nbytes());
}

Buffer::~Buffer() {
  if (!given_away_.load()) account(device_, -nbytes());
  if (!raw_ || !g_client) return;
  auto args = make_args<PJRT_Buffer_Destroy_Args>();
  args.buffer = raw_;
  discard(g_client->api()->PJRT_Buffer_Destroy(&args));
}

Executable::~Executable() {
  if (!raw_ || !g_client) return;
  auto args = make_args<PJRT_LoadedExecutable_Destroy_Args>();
  args.executable = raw_;
  discard(g_client->api()->PJRT_LoadedExecutable_Destroy(&args));
}

std::string Executable::serialize() const {
  const PJRT_Api* api = g_client->api();
  auto get = make_args<PJRT_LoadedExecutable_GetExecutable_Args>();
  get.loaded_executable = raw_;
  g_client->check(api->PJRT_LoadedExecutable_GetExecutable(&get), "GetExecutable");
  auto ser = make_args<PJRT_Executable_Serialize_Args>();
  ser.executable = get.executable;
  std::string bytes;
  PJRT_Error* error = api->PJRT_Executable_Serialize(&ser);
  if (!error) {
    bytes.assign(ser.serialized_bytes, ser.serialized_bytes_size);
    if (ser.serialized_executable_deleter) ser.serialized_executable_deleter(ser.serialized_executable);
  }
  auto destroy = make_args<PJRT_Executable_Destroy_Args>();
  destroy.executable = get.executable;
  api->PJRT_Executable_Destroy(&destroy);
  if (error) {
    try {
      g_client->check(error, "PJRT_Executable_Serialize");
    } catch (const PjrtError&) {
      return "";
    }
  }
  return bytes;
}

BufferPtr Client::from_host(const void* data, const TensorType& type, int device) {
  auto args = make_args<PJRT_Client_BufferFromHostBuffer_Args>();
  args.client = client_;
  args.data = data;
  args.type = to_pjrt(type.dtype);
  args.dims = type.dims.data();
  args.num_dims = type.dims.size();
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  args.device = devices_.at(device);
  check(api_->PJRT_Client_BufferFromHostBuffer(&args), "host-to-device transfer");
  if (args.done_with_host_buffer) release(args.done_with_host_buffer);
  return std::make_shared<Buffer>(args.buffer, device, type);
}

void Client::to_host(const Buffer& buffer, void* dst) {
  auto args = make_args<PJRT_Buffer_ToHostBuffer_Args>();
  args.src = buffer.raw();
  args.dst = dst;
  args.dst_size = static_cast<size_t>(buffer.nbytes());
  check(api_->PJRT_Buffer_ToHostBuffer(&args), "device-to-host transfer");
  if (args.event) wait(args.event);
}

BufferPtr Client::copy_to_device(const Buffer& buffer, int device) {
  auto args = make_args<PJRT_Buffer_CopyToDevice_Args>();
  args.buffer = buffer.raw();
  args.dst_device = devices_.at(device);
  check(api_->PJRT_Buffer_CopyToDevice(&args), "device-to-device copy");
  return std::make_shared<Buffer>(args.dst_buffer, device, buffer.type());
}

ExecutablePtr Client::compile_with(const std::string& mlir_text, const std::string& options) {
  auto program = make_args<PJRT_Program>();
  program.code = const_cast<char*>(mlir_text.data());
  program.code_size = mlir_text.size();
  static const char kFormat[] = "mlir";
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;
  auto args = make_args<PJRT_Client_Compile_Args>();
  args.client = client_;
  args.program = &program;
  args.compile_options = options.data();
  args.compile_options_size = options.size();
  check(api_->PJRT_Client_Compile(&args), "XLA compilation");
  return std::make_shared<Executable>(args.executable);
}

ExecutablePtr Client::compile(const std::string& mlir_text) { return compile_with(mlir_text, compile_options_); }

ExecutablePtr Client::compile_quick(const std::string& mlir_text) {
  if (!quick_compiles_) return compile(mlir_text);
  try {
    return compile_with(mlir_text, quick_compile_options_);
  } catch (const PjrtError&) {
    // Either the plugin does not know the overrides or the program does not compile at all: the
    // full compile tells which, and raises in the second case.
    ExecutablePtr executable = compile(mlir_text);
    quick_compiles_ = false;
    return executable;
  }
}

ExecutablePtr Client::compile_replicated(const std::string& mlir_text, const std::vector<int>& devices) {
  CompileOptions options;
  options.num_replicas = static_cast<int64_t>(devices.size());
  for (int d : devices) options.replica_devices.push_back(device_id(d));
  return compile_with(mlir_text, encode_compile_options(options));
}

ExecutablePtr Client::deserialize(const std::string& bytes) {
  auto args = make_args<PJRT_Executable_DeserializeAndLoad_Args>();
  args.client = client_;
  args.serialized_executable = bytes.data();
  args.serialized_executable_size = bytes.size();
  check(api_->PJRT_Executable_DeserializeAndLoad(&args), "loading a cached executable");
  return std::make_shared<Executable>(args.loaded_executable);
}

namespace {
std::atomic<int64_t> g_execute_call_ns{0};
}  // namespace

double Client::execute_call_seconds() { return static_cast<double>(g_execute_call_ns.load()) * 1e-9; }
void Client::reset_execute_call_seconds() { g_execute_call_ns.store(0); }

ExecuteResult Client::execute(const Executable& executable, int device,
                              const std::vector<const Buffer*>& arguments,
                              const std::vector<TensorType>& output_types,
                              const std::vector<int64_t>& keep_arguments) {
  // On the stack for the usual few arguments: a per-op program runs once per op, and each heap
  // allocation here is a measurable part of strict mode's host time.
  constexpr size_t kOnStack = 16;
  PJRT_Buffer* stack_args[kOnStack];
  PJRT_Buffer* stack_outputs[kOnStack] = {};
  std::vector<PJRT_Buffer*> heap_args, heap_outputs;
  PJRT_Buffer** raw_args = stack_args;
  PJRT_Buffer** raw_outputs = stack_outputs;
  if (arguments.size() > kOnStack) {
    heap_args.resize(arguments.size());
    raw_args = heap_args.data();
  }
  if (output_types.size() > kOnStack) {
    heap_outputs.assign(output_types.size(), nullptr);
    raw_outputs = heap_outputs.data();
  }
  for (size_t i = 0; i < arguments.size(); ++i) raw_args[i] = arguments[i]->raw();
  PJRT_Buffer* const* arg_list = raw_args;
  PJRT_Buffer** output_list = raw_outputs;
  PJRT_Event* done = nullptr;

  auto options = make_args<PJRT_ExecuteOptions>();
  auto args = make_args<PJRT_LoadedExecutable_Execute_Args>();
  args.executable = executable.raw();
  args.options = &options;
  args.argument_lists = &arg_list;
  args.num_devices = 1;
  args.num_args = arguments.size();
  args.output_lists = &output_list;
  args.device_complete_events = &done;
  args.execute_device = devices_.at(device);
  options.non_donatable_input_indices = keep_arguments.data();
  options.num_non_donatable_input_indices = keep_arguments.size();
  auto started = std::chrono::steady_clock::now();
  PJRT_Error* execute_error = api_->PJRT_LoadedExecutable_Execute(&args);
  g_execute_call_ns.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started).count(),
      std::memory_order_relaxed);
  check(execute_error, "program execution");
  // Before the results are counted, so that a donation never shows as a peak of both.
  for (const Buffer* b : arguments) {
    auto deleted = make_args<PJRT_Buffer_IsDeleted_Args>();
    deleted.buffer = b->raw();
    if (PJRT_Error* error = api_->PJRT_Buffer_IsDeleted(&deleted)) {
      discard(error);
    } else if (deleted.is_deleted) {
      b->given_away();
    }
  }

  ExecuteResult result;
  result.outputs.reserve(output_types.size());
  for (size_t i = 0; i < output_types.size(); ++i) {
    result.outputs.push_back(std::make_shared<Buffer>(raw_outputs[i], device, output_types[i]));
  }
  result.done = done;
  return result;
}

std::vector<ExecuteResult> Client::execute_replicated(const Executable& executable,
                                                      const std::vector<int>& devices,
                                                      const std::vector<std::vector<const Buffer*>>& arguments,
                                                      const std::vector<TensorType>& output_types) {
  size_t replicas = devices.size();
  std::vector<std::vector<PJRT_Buffer*>> raw_args(replicas);
  std::vector<PJRT_Buffer* const*> arg_lists(replicas);
  std::vector<std::vector<PJRT_Buffer*>> raw_outputs(replicas, std::vector<PJRT_Buffer*>(output_types.size()));
  std::vector<PJRT_Buffer**> output_lists(replicas);
  std::vector<PJRT_Event*> done(replicas, nullptr);
  for (size_t r = 0; r < replicas; ++r) {
    for (const Buffer* b : arguments.at(r)) raw_args[r].push_back(b->raw());
    arg_lists[r] = raw_args[r].data();
    output_lists[r] = raw_outputs[r].data();
  }
  auto options = make_args<PJRT_ExecuteOptions>();
  auto args = make_args<PJRT_LoadedExecutable_Execute_Args>();
  args.executable = executable.raw();
  args.options = &options;
  args.argument_lists = arg_lists.data();
  args.num_devices = replicas;
  args.num_args = arguments.at(0).size();
  args.output_lists = output_lists.data();
  args.device_complete_events = done.data();
  check(api_->PJRT_LoadedExecutable_Execute(&args), "collective program execution");

  std::vector<ExecuteResult> results(replicas);
  for (size_t r = 0; r < replicas; ++r) {
    for (size_t i = 0; i < output_types.size(); ++i) {
      results[r].outputs.push_back(std::make_shared<Buffer>(raw_outputs[r][i], devices[r], output_types[i]));
    }
    results[r].done = done[r];
  }
  return results;
}

void Client::wait(PJRT_Event* event) {
  if (!event) return;
  auto args = make_args<PJRT_Event_Await_Args>();
  args.event = event;
  PJRT_Error* error = api_->PJRT_Event_Await(&args);
  release(event);
  check(error, "device execution");
}

void Client::await(PJRT_Event* event) {
  if (!event) return;
  auto args = make_args<PJRT_Event_Await_Args>();
  args.event = event;
  check(api_->PJRT_Event_Await(&args), "device execution");
}

void Client::on_ready(PJRT_Event* event, void (*callback)(PJRT_Error* error, void* arg), void* arg) {
  auto args = make_args<PJRT_Event_OnReady_Args>();
  args.event = event;
  args.callback = callback;
  args.user_arg = arg;
  check(api_->PJRT_Event_OnReady(&args), "PJRT_Event_OnReady");
}

void Client::discard(PJRT_Error* error) const {
  if (!error) return;
  auto destroy = make_args<PJRT_Error_Destroy_Args>();
  destroy.error = error;
  api_->PJRT_Error_Destroy(&destroy);
}

bool Client::ready(PJRT_Event* event) {
  auto args = make_args<PJRT_Event_IsReady_Args>();
  args.event = event;
  check(api_->PJRT_Event_IsReady(&args), "PJRT_Event_IsReady");
  return args.is_ready;
}

void Client::release(PJRT_Event* event) {
  if (!event) return;
  auto args = make_args<PJRT_Event_Destroy_Args>();
  args.event = event;
  check(api_->PJRT_Event_Destroy(&args), "PJRT_Event_Destroy");
}

void Client::wait_ready(const Buffer& buffer) {
  auto args = make_args<PJRT_Buffer_ReadyEvent_Args>();
  args.buffer = buffer.raw();
  check(api_->PJRT_Buffer_ReadyEvent(&args), "PJRT_Buffer_ReadyEvent");
  wait(args.event);
}

}  // namespace tpu::runtime
