// Device events for PyTorch's profiler (torch.profiler.profile(activities=[CPU, PrivateUse1])):
// a Kineto child profiler, the registration PyTorch's profiler offers out-of-tree devices.
//
// While a trace runs, the executor records each program run and each compile
// (exec/device_trace.h). At the end they become Kineto activities: a device event per run on the
// device's lane (CONCURRENT_KERNEL, which PyTorch reads as a PrivateUse1 event once the backend
// is renamed), linked to the PyTorch op that launched it through the profiler's correlation id,
// so key_averages() adds its time to that op's device time; a host "tpu launch" event joined to
// it by a flow arrow, as CUDA's launches are; and a host event per compile.

// Kineto's numeric metadata formats through fmt, whose formatting functions libtorch does not
// export: this file compiles its own.
#define FMT_HEADER_ONLY
#include <kineto/GenericTraceActivity.h>
#include <kineto/IActivityProfiler.h>
#include <kineto/libkineto.h>
#include <kineto/output_base.h>

#include <memory>
#include <set>

#include "aten/tpu_tensor.h"
#include "exec/device_trace.h"
#include "runtime/runtime.h"

namespace tpu::aten {

namespace {

using libkineto::ActivityType;
namespace trace = exec::trace;

// Activities outlive the session (the trace is saved after the profiler is gone), and each points
// at its span; one span for all of them.
const libkineto::TraceSpan& device_span() {
  static const libkineto::TraceSpan* span = new libkineto::TraceSpan(0, 0, "tpu");
  return *span;
}

constexpr int64_t kLaneSortBase = 0x1000000;  // device lanes below the host's in the viewer

libkineto::DeviceInfo lane(int device) {
  std::string label = "TPU " + std::to_string(device) + " (" + runtime::Client::get().platform() + ")";
  return {device, kLaneSortBase + device, label, label};
}

// An event on the lane of the host thread that ran it (launches and compiles).
libkineto::GenericTraceActivity host_event(const std::string& name, int64_t start_ns, int64_t end_ns, uint64_t thread,
                                           uint64_t correlation, const libkineto::ITraceActivity* linked) {
  libkineto::GenericTraceActivity event(device_span(), ActivityType::PRIVATEUSE1_RUNTIME, name);
  event.startTime = start_ns;
  event.endTime = end_ns;
  event.device = static_cast<int32_t>(libkineto::processId());
  event.resource = event.threadId = static_cast<int32_t>(thread);
  event.id = static_cast<int32_t>(correlation);
  event.linked = linked;
  return event;
}

class TpuTraceSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit TpuTraceSession(bool compiles) : compiles_(compiles) {}

  void start() override {
    trace::start();
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    trace::stop();
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_activity,
                    int64_t window_start, int64_t) override {
    trace::Trace recorded = trace::take();
    std::set<int> devices;
    uint32_t flow = 0;
    for (const trace::ProgramRun& run : recorded.runs) {
      devices.insert(run.device);
      const libkineto::ITraceActivity* launcher =
          run.correlation ? linked_activity(static_cast<int32_t>(run.correlation)) : nullptr;
      ++flow;

      auto launch = host_event("tpu launch", run.enqueued_ns, run.launched_ns, run.launch_thread, run.correlation,
                               launcher);
      launch.flow.id = flow;
      launch.flow.type = libkineto::kLinkAsyncCpuGpu;
      launch.flow.start = 1;
      launch.addMetadataQuoted("program", run.name);
      logger.handleGenericActivity(launch);

      libkineto::GenericTraceActivity program(device_span(), ActivityType::CONCURRENT_KERNEL, run.name);
      program.startTime = run.start_ns;
      program.endTime = run.end_ns;
      program.device = run.device;
      program.resource = 0;
      program.threadId = 0;
      program.id = static_cast<int32_t>(run.correlation);
      program.linked = launcher;
      program.flow.id = flow;
      program.flow.type = libkineto::kLinkAsyncCpuGpu;
      program.flow.start = 0;
      program.addMetadataQuoted("kind", run.kind);
      program.addMetadataQuoted("ops", run.ops);
      program.addMetadata("output bytes", run.output_bytes);
      program.addMetadata("device", run.device);
      logger.handleGenericActivity(program);
    }
    if (compiles_) {
      for (const trace::Compile& compile : recorded.compiles) {
        auto event = host_event(compile.name, compile.start_ns, compile.end_ns, compile.thread, compile.correlation,
                                compile.correlation ? linked_activity(static_cast<int32_t>(compile.correlation))
                                                    : nullptr);
        event.addMetadataQuoted("origin", compile.origin);
        event.addMetadata("background", compile.background ? "true" : "false");
        logger.handleGenericActivity(event);
      }
    }
    // The first device's lane is named by getDeviceInfo(), which also stops Kineto from naming
    // lanes 0-15 after GPUs; the others here.
    devices.insert(0);
    for (int device : devices) {
      if (device != 0) logger.handleDeviceInfo(lane(device), window_start);
      logger.handleResourceInfo({0, 0, device, "programs"}, window_start);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(lane(0));
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  void pushCorrelationId(uint64_t id) override { trace::push_correlation(id); }
  void popCorrelationId() override { trace::pop_correlation(); }

 private:
  bool compiles_;
};

class TpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override {
    static const std::string name = "tpu";
    return name;
  }
  const std::set<ActivityType>& availableActivities() const override {
    static const std::set<ActivityType> activities{ActivityType::CONCURRENT_KERNEL,
                                                   ActivityType::PRIVATEUSE1_RUNTIME};
    return activities;
  }
  // A session only when the device's events were asked for (ProfilerActivity.PrivateUse1 brings
  // CONCURRENT_KERNEL); a CPU-only profile records nothing here.
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& types,
                                                                 const libkineto::Config&) override {
    if (!types.count(ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return std::make_unique<TpuTraceSession>(types.count(ActivityType::PRIVATEUSE1_RUNTIME) > 0);
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }
};

const bool g_registered = [] {
  libkineto::api().registerProfilerFactory([] { return std::make_unique<TpuActivityProfiler>(); });
  return true;
}();

}  // namespace

}  // namespace tpu::aten
